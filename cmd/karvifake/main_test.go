package main

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"karvi-edda-temporal/internal/timescale"
)

// TestMain lets the test binary stand in for the command, so the process
// test below runs karvifake as a real separate process without a go build.
func TestMain(m *testing.M) {
	if os.Getenv("KARVIFAKE_RUN_MAIN") == "1" {
		os.Args = append([]string{"karvifake"}, strings.Fields(os.Getenv("KARVIFAKE_ARGS"))...)
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func TestTaskFlag(t *testing.T) {
	var f taskFlags
	for _, ok := range []string{"T5:dispatched:brief", "T6:pending", "T7:in_progress:path", "T8:blocked:none"} {
		if err := f.Set(ok); err != nil {
			t.Fatalf("Set(%q): %v", ok, err)
		}
	}
	if len(f) != 4 || !f[0].BriefPath || string(f[0].Brief) != "{}" || f[1].BriefPath || !f[2].BriefPath || f[2].Brief != nil || f[3].BriefPath {
		t.Fatalf("parsed %+v", f)
	}
	for _, bad := range []string{"T5", ":dispatched", "T5::brief", "T5:dispatched:yes", "a:b:c:d"} {
		if err := f.Set(bad); err == nil {
			t.Errorf("Set(%q) accepted", bad)
		}
	}
}

// -time-scale, else KARVI_EDDA_TIME_SCALE, sets the fake's time scale; a
// bad value is refused naming it.
func TestTimeScaleFlagAndVariable(t *testing.T) {
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	for _, tc := range []struct {
		args []string
		env  map[string]string
		want timescale.Scale
	}{
		{nil, nil, 1},
		{nil, map[string]string{"KARVI_EDDA_TIME_SCALE": "60"}, 60},
		{[]string{"-time-scale", "30"}, map[string]string{"KARVI_EDDA_TIME_SCALE": "60"}, 30},
	} {
		c, err := parseArgs(tc.args, env(tc.env))
		if err != nil || c.opts.TimeScale != tc.want {
			t.Errorf("%v %v: scale %v, %v; want %v", tc.args, tc.env, c.opts.TimeScale, err, tc.want)
		}
	}
	for _, bad := range []struct {
		args []string
		env  map[string]string
		want string
	}{
		{nil, map[string]string{"KARVI_EDDA_TIME_SCALE": "0.5"}, `KARVI_EDDA_TIME_SCALE: time scale "0.5"`},
		{[]string{"-time-scale", "fast"}, nil, `"fast"`},
	} {
		_, err := parseArgs(bad.args, env(bad.env))
		if err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("%v %v: %v, want an error containing %q", bad.args, bad.env, err, bad.want)
		}
	}
	c, err := parseArgs([]string{"-rate-limit", "off", "-task", "T1:pending"}, env(map[string]string{"KARVI_API_TOKEN": "tok"}))
	if err != nil || c.opts.Token != "tok" || len(c.tasks) != 1 || c.opts.RateLimit >= 0 {
		t.Errorf("parsed %+v, %v", c, err)
	}
}

func TestRunsAsSeparateProcess(t *testing.T) {
	const token = "proc-secret-token"
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(),
		"KARVIFAKE_RUN_MAIN=1",
		"KARVIFAKE_ARGS=-addr 127.0.0.1:0 -task T5:dispatched:brief",
		"KARVI_API_TOKEN="+token)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	defer func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
		}
	}()
	line, err := bufio.NewReader(stdout).ReadString('\n')
	go func() { _, _ = io.Copy(io.Discard, stdout); exited <- cmd.Wait() }()
	if err != nil {
		t.Fatalf("no startup line: %v", err)
	}
	if strings.Contains(line, token) || !strings.Contains(line, "auth on") {
		t.Fatalf("startup line %q", line)
	}
	i := strings.Index(line, "http://")
	if i < 0 {
		t.Fatalf("no URL in %q", line)
	}
	url := strings.Fields(line[i:])[0]

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "PATCH", url+"/api/brief/T5", strings.NewReader(`{"a":1}`))
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("PATCH: %d", resp.StatusCode)
	}
	resp, err = http.Get(url + "/_fake/writes/T5")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(body), `"Method":"PATCH"`) {
		t.Fatalf("writes: %s", body)
	}

	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("exit after SIGTERM: %v", err)
		}
		exited <- nil // let the deferred cleanup see it is gone
	case <-time.After(10 * time.Second):
		t.Fatal("did not exit on SIGTERM")
	}
}
