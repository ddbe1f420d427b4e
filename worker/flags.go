package main

import (
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
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

// workerFlag declares one setting of the worker: its flag, its environment
// variable, its default and its help, once. The flag set, the reading of
// the environment, `worker -h` and the table of docs/configuration.md are
// all made from workerFlags, so none of them can forget a flag or tell it
// differently.
type workerFlag struct {
	// name is the flag without its dash; "" for a setting read only from
	// its variable (a secret, which must not sit on a command line).
	name string
	env  string
	// def is the default as the flag parses it; "" leaves the zero value.
	def string
	// docDef is the default as the table says it, when the zero value
	// stands for something ("off", "the hostname"); else def, quoted.
	docDef string
	// help is the flag's line in `worker -h`; a `quoted` word names its
	// value. doc is its meaning in docs/configuration.md, in markdown, when
	// the table says more than the line; else help.
	help, doc string
	// value points at where the flag's value lives in the configuration: a
	// *string, *bool, *int, *time.Duration or a flag.Value.
	value func(c *config) any
}

// workerFlags are the worker's settings but the connection's (-address,
// -namespace, -task-queue), which temporalconn declares and resolves with
// the temporal CLI's profile. A flag on the command line wins over its
// variable, the variable over the default. The order is the table's.
var workerFlags = []workerFlag{
	{name: "work-root", env: "KARVI_EDDA_WORK_ROOT", def: ".run/work",
		value: func(c *config) any { return &c.workRoot },
		help:  "directory holding every task's workspace and run records",
		doc:   "every task's workspace (`tasks/<id>`) and run records (`runs/<id>/<plan>`); nothing is written outside it, and a dispatch's `workingDir` must lie inside it"},
	{name: "conductor", env: "EDDA_BIN", def: "edda",
		value: func(c *config) any { return &c.conductor },
		help:  "the edda binary, or the simulator",
		doc:   "the conductor binary"},
	{name: "templates", env: "KARVI_EDDA_TEMPLATES", docDef: "built-in only",
		value: func(c *config) any { return &c.templates },
		help:  "directory of operator plan templates, one YAML per skill",
		doc:   "a folder of plan templates, one YAML per skill (`testdata/templates/review.yaml` shows the format); a file named `default` overrides the built-in"},
	{name: "sink", env: "KARVI_EDDA_SINK", def: "file",
		value: func(c *config) any { return &c.sinkKind },
		help:  "where briefs and task status go: file or karvi",
		doc:   "`file` or `karvi`"},
	{name: "sink-dir", env: "KARVI_EDDA_SINK_DIR", def: ".run/briefs",
		value: func(c *config) any { return &c.sinkDir },
		help:  "directory of the file sink",
		doc:   "file sink: `<dir>/<task>/brief.json`, `patches.jsonl`, `status.json`"},
	{name: "karvi-url", env: "KARVI_URL", def: "http://localhost:3461",
		value: func(c *config) any { return &c.karviURL },
		help:  "karvi base URL for the karvi sink; the token comes only from KARVI_API_TOKEN",
		doc:   "karvi sink"},
	{name: "karvi-rate-limit", env: "KARVI_RATE_LIMIT", def: strconv.Itoa(karvi.DefaultRateLimit),
		value: func(c *config) any { return &c.karviRateLimit },
		help:  "requests a `minute` the worker sends to karvi, all tasks together, or off: karvi's own KARVI_RATE_LIMIT (default 120); the worker keeps under it and waits out a 429's Retry-After",
		doc:   "requests a minute the worker sends to karvi, all its tasks together, or `off`: set it to karvi's own `KARVI_RATE_LIMIT` (the same variable, so one setting serves both); the worker keeps a little under it, waits out a 429's `Retry-After`, and merges brief updates that wait (see [karvi and edda in real use](karvi-and-edda.md#running-against-karvi-the-settings-that-matter))"},
	{env: "KARVI_API_TOKEN",
		doc: "karvi bearer token: only from the environment, never in workflow input, history or logs, and removed from the conductor's environment"},
	{name: "stop-grace", env: "KARVI_EDDA_STOP_GRACE", def: "10s",
		value: func(c *config) any { return &c.stopGrace },
		help:  "time a stopped conductor gets between TERM and KILL",
		doc:   "TERM-to-KILL grace when stopping a conductor; a worker asked to stop (SIGTERM) gives the activities in flight this plus 5 s to end"},
	{name: "tail-linger", env: "KARVI_EDDA_TAIL_LINGER", def: "5ms",
		value: func(c *config) any { return &c.tailLinger },
		help:  "workflows started by an earlier version only: how long their tail keeps collecting after the first new line, to batch bursts",
		doc:   "workflows started by an earlier version only (they still tail in batches): how long the tail keeps collecting after the first new line"},
	{name: "tail-poll", env: "KARVI_EDDA_TAIL_POLL", def: "250ms",
		value: func(c *config) any { return &c.tailPoll },
		help:  "fallback poll interval of the event-log tail",
		doc:   "fallback poll interval of the event-log tail (inotify wakes it first)"},
	{name: "tail-heartbeat", env: "KARVI_EDDA_TAIL_HEARTBEAT", def: durationText(activities.DefaultTailHeartbeat),
		value: func(c *config) any { return &c.tailHeartbeat },
		help:  "heartbeat timeout of a running task's delivering tail: how long a killed worker's tasks wait before another worker delivers for them; their heartbeats are a running task's only server cost between phase boundaries",
		doc:   "heartbeat timeout of a running task's delivering tail: a SIGKILLed worker's tasks wait this long before another worker delivers for them (nothing is lost or sent twice meanwhile); the heartbeats are a running task's only server cost between phase boundaries (one every 0.8 of it)"},
	{name: "max-activities", env: "KARVI_EDDA_MAX_ACTIVITIES", def: "5000",
		value: func(c *config) any { return &c.maxActivities },
		help:  "activities this worker runs at once; every running task holds one (its delivering tail), so this bounds the tasks one worker carries",
		doc:   "activities the worker runs at once on each of its queues; every running task holds one on the host's queue (its delivering tail), so this bounds the tasks one worker carries, and a full worker takes no new attempt"},
	{name: "register-search-attributes", env: "KARVI_EDDA_REGISTER_SEARCH_ATTRIBUTES", def: "true",
		value: func(c *config) any { return &c.registerSearchAttrs },
		help:  "add the workflow's search attributes to the namespace if missing",
		doc:   "add the workflow's search attributes to the namespace at start when missing; a worker refused that stops and prints the exact `temporal operator search-attribute create` command to run once ([deploy.md](deploy.md#search-attributes)); `false` where it may not even list them"},
	{name: "codec-addr", env: "KARVI_EDDA_CODEC_ADDR", docDef: "off",
		value: func(c *config) any { return &c.codecAddr },
		help:  "serve the payload codec endpoint for the Web UI and CLI on this `address` (127.0.0.1:port); needs KARVI_TEMPORAL_CODEC_KEY",
		doc:   "serve the codec endpoint on 127.0.0.1:PORT for the Web UI (\"Codec Server\" setting) and `temporal --codec-endpoint`; needs `KARVI_TEMPORAL_CODEC_KEY`"},
	{env: "KARVI_TEMPORAL_CODEC_CORS_ORIGINS", docDef: "the dev server's Web UI",
		doc: "browser origins (comma-separated) allowed to call the codec endpoint, e.g. your Web UI's `https://temporal.example`"},
	{name: "pprof-addr", env: "KARVI_EDDA_PPROF_ADDR", docDef: "off",
		value: func(c *config) any { return &c.pprofAddr },
		help:  "serve net/http/pprof on this loopback `address` (127.0.0.1:port), for profiling",
		doc:   "serve `net/http/pprof` on 127.0.0.1:PORT"},
	{name: "events-dir", env: "KARVI_EDDA_EVENTS_DIR", docDef: "`<work-root>/events`",
		value: func(c *config) any { return &c.eventsDir },
		help:  "`directory` of the tasks' canonical event streams, one <run_id>.jsonl per task (default <work-root>/events)",
		doc:   "each task's canonical event stream, `<dir>/run-<taskId>.jsonl` (see [following a task's events](operating.md#following-a-tasks-events)); every worker of a task queue must see the same directory"},
	{name: "metrics-addr", env: "KARVI_EDDA_METRICS_ADDR", docDef: "off",
		value: func(c *config) any { return &c.metricsAddr },
		help:  "serve Prometheus metrics on /metrics at this loopback `address` (127.0.0.1:port): the SDK's and the worker's own",
		doc:   "serve Prometheus metrics on 127.0.0.1:PORT at `/metrics`: the SDK's and the worker's own (see [metrics](operating.md#metrics))"},
	{name: "host", env: "KARVI_EDDA_HOST", docDef: "the hostname",
		value: func(c *config) any { return &c.host },
		help:  "`name` of this worker's machine in a fleet: it also polls <task-queue>@<name>, where the activities of the conductors it starts go (default the hostname)",
		doc:   "this worker's machine in a fleet (letters, digits, `.`, `_`, `-`): it also polls `<task-queue>@<host>`, where the activities of the conductors it starts go (see [fleet.md](fleet.md)); one name per machine and work root"},
	{name: "intake-karvi", env: "KARVI_EDDA_INTAKE_KARVI", def: "false",
		value: func(c *config) any { return &c.intakeKarvi },
		help:  "follow the karvi board at -karvi-url and run the tasks it routes here by themselves (needs -sink karvi; docs/intake.md)",
		doc:   "follow the karvi board at `-karvi-url` and run the tasks it routes here by themselves, no `starter start` needed (needs `-sink karvi`; see [driving it from karvi](karvi-and-edda.md#driving-it-from-karvi))"},
	{name: "intake-runtime-hint", env: "KARVI_EDDA_INTAKE_RUNTIME_HINT", def: intake.DefaultRuntimeHint,
		value: func(c *config) any { return &c.intakeHint },
		help:  "the runtimeHint of the karvi tasks the intake takes",
		doc:   "the `runtimeHint` of the karvi tasks the intake takes (case-sensitive)"},
	{name: "intake-poll", env: "KARVI_EDDA_INTAKE_POLL", def: durationText(intakeapi.DefaultPoll),
		value: func(c *config) any { return &c.intakePoll },
		help:  "how often the intake reads karvi's board again besides its live feed (karvi's review writes without an event)",
		doc:   "how often the intake reads karvi's board and checks which of its task workflows ended, besides following karvi's live feed (karvi's review writes the board without an event)"},
	{name: "notify-url", env: "KARVI_EDDA_NOTIFY_URL", docDef: "off",
		value: func(c *config) any { return &c.notifyURL },
		help:  "http(s) `URL` of a webhook told when a task pauses, resumes or ends blocked, a host is lost, a run ends (signed with KARVI_EDDA_NOTIFY_SECRET, which it needs); empty for none",
		doc:   "a webhook (http or https) told, as signed JSON, when a task pauses on a usage limit and when it resumes, when a task ends blocked, when a host is given up and when a run ends ([pauses.md](pauses.md)); needs `KARVI_EDDA_NOTIFY_SECRET`"},
	{env: "KARVI_EDDA_NOTIFY_SECRET",
		doc: "the webhook's HMAC-SHA256 key (header `X-Karvi-Edda-Signature`, over the `X-Karvi-Edda-Timestamp` and the body): only from the environment"},
	{name: "notify-dead-letter", env: "KARVI_EDDA_NOTIFY_DEAD_LETTER", docDef: "`<work-root>/notify-dead-letter.jsonl`",
		value: func(c *config) any { return &c.notifyDeadLetter },
		help:  "JSONL `file` keeping the notifications the webhook did not take (default <work-root>/notify-dead-letter.jsonl)",
		doc:   "where the notifications the webhook did not take are kept, one JSON line each"},
	{name: "limit-patterns", env: "KARVI_EDDA_LIMIT_PATTERNS", docDef: "built-in only",
		value: func(c *config) any { return &c.limitPatterns },
		help:  "YAML `file` of usage-limit message patterns of your own, tried before the built-in ones (docs/pauses.md)",
		doc:   "a YAML file of usage-limit message patterns of your own, tried before the built-in ones (format in [pauses.md](pauses.md)); a bad pattern stops the worker with an error naming it"},
	{name: "stall-after", env: "KARVI_EDDA_STALL_AFTER", def: durationText(stalls.DefaultAfter),
		value: func(c *config) any { return &c.stallAfter },
		help:  "a phase with no event and no agent transcript line for this long has stalled, when its dispatch sets no stallAfterSec; applies only to phases whose timeout is longer; 0 watches for none (docs/stalls.md)",
		doc:   "a phase with no event and no agent transcript line for this long has stalled ([stalls.md](stalls.md)), for tasks whose dispatch sets no `stallAfterSec`; it applies only to phases whose timeout is longer (with karvi's default timeout of 300 s it does not); `0` watches for none"},
	{name: "on-stall", env: "KARVI_EDDA_ON_STALL", def: string(stalls.Warn),
		value: func(c *config) any { return &c.onStall },
		help:  "what follows a stall when the dispatch sets no onStall: warn (report only), redispatch (attempt n+1) or abort",
		doc:   "what follows a stall when the dispatch sets no `onStall`: `warn` (report only: a note on the brief, an event, a metric, a `stalled` notification; the phase goes on), `redispatch` (stop the attempt, start the next) or `abort`"},
	{name: "account", env: "KARVI_EDDA_ACCOUNT", docDef: "`default.<task-queue>`",
		value: func(c *config) any { return &c.account },
		help:  "the agent `account` of the tasks that name no account and no slot pool: they pause together when one meets a usage limit; none: each pauses alone (default default.<task-queue>, one per task queue; docs/pauses.md)",
		doc:   "the agent account of the tasks that name no account (`starter start -account`) and no slot pool: a usage limit one of them meets pauses them all ([pauses.md](pauses.md)); by default one per task queue, so the account's workflow runs where its tasks' workers are; give the same name to the workers whose agents share one login; `none`: each such task pauses alone"},
	{name: "time-scale", env: timescale.Env, def: "1",
		value: func(c *config) any { return &c.timeScale },
		help:  "how many times faster than real time every period runs, for tests and soaks: at 60 a minute lasts a second (the fence sweep, heartbeats and graces, stall thresholds, the intake poll, pauses, the karvi rate limit's minute, the workflows' waits; docs/timescale.md); a period set by its own flag is used as given; 1 is real time",
		doc:   "for tests and soaks: how many times faster than real time every period of the worker and of the workflows it starts runs (a number of at least 1; at `60` a minute lasts a second): the fence sweep, heartbeats and graces, stall thresholds, the intake poll, pauses, the karvi rate limit's minute and the waits for a person; a period set by its own flag or variable is used as given; [timescale.md](timescale.md) lists them all"},
}

const usageHeader = `worker: runs this runtime's workflows and their activities on a Temporal
task queue: each task's (TaskWorkflow, which spawns and follows the
conductor), runs of dependent tasks, agent slot pools, schedule intents,
agent accounts' pauses and, with -intake-karvi, the intake of karvi's board.

Usage: worker [flags]

Every flag can be set by the environment variable in its description; the
flag wins. TLS, API keys and profiles are read the way the temporal CLI reads
them: TEMPORAL_API_KEY, TEMPORAL_TLS_*, TEMPORAL_CONFIG_FILE, TEMPORAL_PROFILE
(docs/configuration.md). Payload encryption: KARVI_TEMPORAL_CODEC_KEY.

Flags:
`

func newFlagSet(c *config) *flag.FlagSet {
	fs := flag.NewFlagSet("worker", flag.ContinueOnError)
	// Errors and help are printed once, by main.
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	c.conn.Register(fs)
	for _, d := range workerFlags {
		if d.name != "" {
			d.register(fs, c)
		}
	}
	return fs
}

// register adds the flag to fs, its value at its default.
func (d workerFlag) register(fs *flag.FlagSet, c *config) {
	usage := d.help + " (env " + d.env + ")"
	switch p := d.value(c).(type) {
	case *string:
		fs.StringVar(p, d.name, "", usage)
	case *bool:
		fs.BoolVar(p, d.name, false, usage)
	case *int:
		fs.IntVar(p, d.name, 0, usage)
	case *time.Duration:
		fs.DurationVar(p, d.name, 0, usage)
	case flag.Value:
		fs.Var(p, d.name, usage)
	default:
		panic(fmt.Sprintf("worker flag -%s: a value of type %T", d.name, p))
	}
	f := fs.Lookup(d.name)
	if d.def != "" {
		// Through the value, not fs.Set, so the flag does not count as given.
		if err := f.Value.Set(d.def); err != nil {
			panic(fmt.Sprintf("worker flag -%s: default %q: %v", d.name, d.def, err))
		}
	}
	f.DefValue = f.Value.String()
}

// The markers around the table of docs/configuration.md that flagsMarkdown
// writes; TestConfigurationDocMatchesTheFlags keeps the two equal.
const (
	flagTableBegin = "<!-- worker flags: made from workerFlags (worker/flags.go) by `go test ./worker -run TestConfigurationDocMatchesTheFlags -update`; edit there, not here -->"
	flagTableEnd   = "<!-- end of worker flags -->"
)

// flagsMarkdown is the table of every worker setting, in markdown.
//
//go:generate go test -run TestConfigurationDocMatchesTheFlags -update .
func flagsMarkdown() string {
	var b strings.Builder
	b.WriteString("| flag | env | default | meaning |\n|---|---|---|---|\n")
	for _, d := range workerFlags {
		name := "(none)"
		if d.name != "" {
			name = "`-" + d.name + "`"
		}
		def := d.docDef
		if def == "" && d.def != "" {
			def = "`" + d.def + "`"
		}
		doc := d.doc
		if doc == "" {
			doc = d.help
		}
		cell := strings.NewReplacer("|", `\|`, "\n", " ")
		fmt.Fprintf(&b, "| %s | `%s` | %s | %s |\n", name, d.env, cell.Replace(def), cell.Replace(doc))
	}
	return b.String()
}

// durationText writes d as a person would: 1m, not 1m0s.
func durationText(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
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
	for _, d := range workerFlags {
		v := getenv(d.env)
		if d.name == "" || given[d.name] || v == "" {
			continue
		}
		if err := fs.Set(d.name, v); err != nil {
			return c, fmt.Errorf("%s=%q: want %s (it sets -%s)", d.env, v, want(fs.Lookup(d.name)), d.name)
		}
		given[d.name] = true
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
	fmt.Fprint(w, "\nSettings read from the environment only:\n")
	for _, d := range workerFlags {
		if d.name == "" {
			fmt.Fprintf(w, "  %s\n    \t%s\n", d.env, strings.ReplaceAll(d.doc, "`", ""))
		}
	}
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
