package limits

import (
	"flag"
	"io"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestUserPatterns(t *testing.T) {
	c, err := ParseConfig([]byte(`
zone: Europe/Paris
patterns:
  - name: proxy-quota
    match: 'proxy: quota exhausted, come back in (?P<reset>\d+) ?s'
    reset: after
  - name: gateway-unix
    match: 'gateway budget spent until (?P<reset>\d{10})'
    reset: unix
  - name: gateway-time
    match: 'gateway closed until (?P<reset>[^.]+)\.'
    reset: time
  - name: gateway-time-zone
    match: 'budget refills at (?P<reset>\d{1,2}:\d{2}) in (?P<zone>[A-Za-z_/]+)'
    reset: time
  - name: team-cap
    match: 'team cap hit'
  - name: hard-stop
    match: 'billing frozen'
    reset: none
  - name: override
    match: "you've hit your limit"
    reset: none
`))
	require.NoError(t, err)
	d, err := New(c)
	require.NoError(t, err)
	cases := []struct {
		text, source string
		want         string // RFC 3339, "" for unknown
	}{
		{"proxy: quota exhausted, come back in 45 s", "pattern:proxy-quota", "2026-03-10T14:00:45Z"},
		{"gateway budget spent until 1773158400", "pattern:gateway-unix", "2026-03-10T16:00:00Z"},
		{"gateway closed until Apr 2 at 9am (America/New_York).", "pattern:gateway-time", "2026-04-02T13:00:00Z"},
		{"gateway closed until 16:00.", "pattern:gateway-time", "2026-03-10T15:00:00Z"}, // Config.Zone: Paris
		{"budget refills at 09:00 in Asia/Tokyo", "pattern:gateway-time-zone", "2026-03-11T00:00:00Z"},
		{"Team cap hit · resets 6pm (UTC)", "pattern:team-cap", "2026-03-10T18:00:00Z"},
		{"billing frozen, resets 6pm (UTC)", "pattern:hard-stop", ""},
		// the caller's patterns come before the built-in ones
		{"You've hit your limit · resets 3am (UTC)", "pattern:override", ""},
		// the built-in ones still apply
		{"5-hour limit reached ∙ resets 12pm", "pattern:claude-window-limit-reached", "2026-03-11T11:00:00Z"},
	}
	for _, tc := range cases {
		v := d.Text(tc.text, now)
		require.True(t, v.Limited, tc.text)
		assert.Equal(t, tc.source, v.Source, tc.text)
		got := ""
		if !v.ResetAt.IsZero() {
			got = v.ResetAt.Format("2006-01-02T15:04:05Z07:00")
		}
		assert.Equal(t, tc.want, got, tc.text)
	}
	assert.False(t, d.Text("test TestRateLimit failed", now).Limited)
}

func TestBadPatterns(t *testing.T) {
	cases := []struct {
		p    Pattern
		want string
	}{
		{Pattern{Name: "", Match: "x"}, `"#1": name must be`},
		{Pattern{Name: "has space", Match: "x"}, `"has space": name must be`},
		{Pattern{Name: "empty", Match: "  "}, `"empty": match is empty`},
		{Pattern{Name: "broken", Match: "limit (reached"}, `"broken": match is not a valid regexp`},
		{Pattern{Name: "mode", Match: "x", Reset: "soon"}, `"mode": reset "soon" is not one of`},
		{Pattern{Name: "nogroup", Match: "limit for (\\d+)s", Reset: ResetAfter}, `"nogroup": reset "after" needs a group named reset`},
		{Pattern{Name: "everything", Match: "x*"}, `"everything": match "x*" matches empty text`},
		{Pattern{Name: "broad", Match: `rate ?limit`}, `"broad": match "rate ?limit" is too broad: it matches the ordinary check failure`},
		{Pattern{Name: "broad2", Match: `usage.*limit`}, `"broad2": match "usage.*limit" is too broad`},
		{Pattern{Name: "broad3", Match: `429`}, `"broad3": match "429" is too broad`},
		{Pattern{Name: "hit-your-limit", Match: "zzz"}, `"hit-your-limit": the name is already used`},
		{Pattern{Name: "generic", Match: "zzz"}, `"generic": the name is already used`},
	}
	for _, tc := range cases {
		_, err := New(Config{Patterns: []Pattern{tc.p}})
		require.Error(t, err, "%+v", tc.p)
		assert.Contains(t, err.Error(), tc.want)
	}
	// duplicates among the caller's own, and every bad one reported at once
	_, err := New(Config{Patterns: []Pattern{{Name: "a", Match: "aaa"}, {Name: "a", Match: "bbb"}, {Name: "c", Match: "("}}})
	require.Error(t, err)
	assert.Contains(t, err.Error(), `"a": the name is already used`)
	assert.Contains(t, err.Error(), `"c": match is not a valid regexp`)

	_, err = New(Config{Zone: "Nowhere/Town"})
	assert.ErrorContains(t, err, `zone "Nowhere/Town" is not a known IANA zone name`)

	_, err = ParseConfig([]byte("patterns:\n  - name: x\n    regexp: y\n"))
	assert.ErrorContains(t, err, "field regexp not found")
	_, err = ParseConfig([]byte("patterns:\n  - name: bad\n    match: '('\n"))
	assert.ErrorContains(t, err, `limit pattern "bad"`)
	c, err := ParseConfig(nil)
	assert.NoError(t, err)
	assert.Equal(t, Config{}, c)
}

func TestPatternFlags(t *testing.T) {
	var pf PatternFlags
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Var(&pf, "limit-pattern", "")
	require.NoError(t, fs.Parse([]string{
		"-limit-pattern", `proxy,after=quota exhausted, retry in (?P<reset>\d+)s`,
		"-limit-pattern", `cap=team cap hit`,
	}))
	require.Len(t, pf, 2)
	assert.Equal(t, Pattern{Name: "proxy", Match: `quota exhausted, retry in (?P<reset>\d+)s`, Reset: ResetAfter}, pf[0])
	assert.Equal(t, Pattern{Name: "cap", Match: "team cap hit"}, pf[1])
	assert.Equal(t, `proxy,after=quota exhausted, retry in (?P<reset>\d+)s cap=team cap hit`, pf.String())
	d, err := New(Config{Patterns: pf})
	require.NoError(t, err)
	v := d.Text("quota exhausted, retry in 40s", now)
	assert.Equal(t, "pattern:proxy", v.Source)
	assert.True(t, now.Add(40*time.Second).Equal(v.ResetAt))

	err = fs.Parse([]string{"-limit-pattern", "no equals sign"})
	assert.ErrorContains(t, err, "want NAME=REGEXP")
	err = fs.Parse([]string{"-limit-pattern", "wide=rate limit"})
	assert.ErrorContains(t, err, `limit pattern "wide"`)
}

func TestDefaultPatternsCopy(t *testing.T) {
	ps := DefaultPatterns()
	require.NotEmpty(t, ps)
	ps[0].Match = "changed"
	assert.NotEqual(t, "changed", DefaultPatterns()[0].Match)
	// the built-in patterns pass the checks a caller's must pass
	_, err := compile(DefaultPatterns(), nil)
	assert.NoError(t, err)
}
