package redact

import (
	"fmt"
	"strings"
	"testing"
)

// Realistic-looking secrets. None of them is a real credential.
const (
	openAIKey    = "sk-proj-Xq3vB8nL2mK9pR4tY7wZ1aC5dF6gH0jE"
	anthropicKey = "sk-ant-api03-Zx8Qm2Vb7Nc4Lk1Jh6Gf3Ds9Aa0Ww5Ee"
	awsKeyID     = "AKIAIOSFODNN7EXAMPLE"
	gcpKey       = "AIzaSyD-9tSrke72PouQMnMX-a7eZSW0jkFMBWY"
	ghpToken     = "ghp_16C7e42F292c6912E7710c838347Ae178B4a"
	ghoToken     = "gho_16C7e42F292c6912E7710c838347Ae178B4a"
	ghuToken     = "ghu_16C7e42F292c6912E7710c838347Ae178B4a"
	jwt          = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0In0.dBjftJeZ4CVPmB92K27uhbUJU1p1r_wW1gFWFOEjXk"
	longBase64   = "Zm9vYmFyMTIzNDU2Nzg5MGFiY2RlZmdoaWprbG1ub3BxcnN0dXZ3eHl6QUJD"
	longHex      = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"
	gitSHA       = "0123456789abcdef0123456789abcdef01234567"
	rsaBlock     = "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEAu1SU1LfVLPHCozMxH2Mo4lgOEePzNm0tRgeLezV6ffAt0gun\nVTLw7onLRnrq0/IzW7yWR7QkrmBL7jTKEn5u+qKhbwKfBstIs+bMY2Zkp18gnTxK\n-----END RSA PRIVATE KEY-----"
)

var stringCases = []struct {
	name, in, want string
}{
	// Value patterns, each inside a sentence.
	{"openai key", "using key " + openAIKey + " for the run", "using key " + Mask + " for the run"},
	{"anthropic key", "ANTHROPIC says " + anthropicKey + ".", "ANTHROPIC says " + Mask + "."},
	{"aws key id", "aws configure set " + awsKeyID + " done", "aws configure set " + Mask + " done"},
	{"aws temp key id", "got ASIAY34FZKBOKMUTVV7A from sts", "got " + Mask + " from sts"},
	{"gcp key", "maps?key=x&k2 " + gcpKey + " end", "maps?key=x&k2 " + Mask + " end"},
	{"github ghp", "cloned with " + ghpToken, "cloned with " + Mask},
	{"github gho", "(" + ghoToken + ")", "(" + Mask + ")"},
	{"github ghu", "token:" + ghuToken, "token:" + Mask},
	{"github fine grained", "pat github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz here", "pat " + Mask + " here"},
	{"slack", "hook xoxb-123456789012-abcdefghijkl ok", "hook " + Mask + " ok"},
	{"jwt", "session " + jwt + " expired", "session " + Mask + " expired"},
	{"bearer in prose", "sent Bearer abc123.def_456 upstream", "sent Bearer " + Mask + " upstream"},
	{"bearer lowercase", "auth bearer Zx9_token-value", "auth bearer " + Mask},
	{"bearer jwt", "Bearer " + jwt, "Bearer " + Mask},
	{"pem rsa", "key:\n" + rsaBlock + "\nnext line", "key:\n" + Mask + "\nnext line"},
	{"pem ec", "-----BEGIN EC PRIVATE KEY-----\nMHcCAQEEIIm\n-----END EC PRIVATE KEY-----", Mask},
	{"pem openssh", "x -----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\n-----END OPENSSH PRIVATE KEY----- y", "x " + Mask + " y"},
	{"pem pkcs8", "-----BEGIN PRIVATE KEY-----\nMIIEvQ\n-----END PRIVATE KEY-----", Mask},
	{"pem unterminated", "dump: -----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEAu1SU1Lf\ntruncated", "dump: " + Mask},
	{"pem end line without a label", "-----BEGIN PRIVATE KEY----------END " + rsaBlock + " tail", Mask + " tail"},
	{"pem escaped newlines", `"-----BEGIN RSA PRIVATE KEY-----\nMIIE\n-----END RSA PRIVATE KEY-----"`, `"` + Mask + `"`},
	{"long base64", "blob " + longBase64 + " end", "blob " + Mask + " end"},
	{"long base64 padded", "blob " + longBase64 + "== end", "blob " + Mask + " end"},
	{"long hex", "sha256 " + longHex, "sha256 " + Mask},
	{"git sha 40 is masked by the long hex rule", "commit " + gitSHA + " merged", "commit " + Mask + " merged"},
	{"hex inside a path", "objects/" + longHex + "/data", "objects/" + Mask + "/data"},
	{"url password", "DATABASE_URL postgres://app:s3cr3t-pw@db.local:5432/app", "DATABASE_URL postgres://app:" + Mask + "@db.local:5432/app"},

	// Key names in every syntax.
	{"json key", `{"api_key": "v4lue-S3cret", "n": 1}`, `{"api_key": "` + Mask + `", "n": 1}`},
	{"json key compact", `{"password":"hunter2"}`, `{"password":"` + Mask + `"}`},
	{"json number value", `{"passwd": 123456, "x": 1}`, `{"passwd": ` + Mask + `, "x": 1}`},
	{"json object value", `{"credentials": {"user": "u", "pass": "p"}, "ok": true}`, `{"credentials": ` + Mask + `, "ok": true}`},
	{"escaped json", `{"line":"{\"token\":\"abc123\"}"}`, `{"line":"{\"token\":\"` + Mask + `\"}"}`},
	{"key=value", "secret=abc123 next", "secret=" + Mask + " next"},
	{"key = value", "password = hunter2", "password = " + Mask},
	{"key: value", "credential: abc-def", "credential: " + Mask},
	{"yaml quoted", "private_key: 'line one'", "private_key: '" + Mask + "'"},
	{"query string", "GET /cb?code=1&access_key=AbC123&state=x", "GET /cb?code=1&access_key=" + Mask + "&state=x"},
	{"env upper", "export OPENAI_API_KEY=" + openAIKey, "export OPENAI_API_KEY=" + Mask},
	{"env prefixed", "DB_PASSWORD=hunter2 GITHUB_TOKEN=xyz ./run", "DB_PASSWORD=" + Mask + " GITHUB_TOKEN=" + Mask + " ./run"},
	{"secret key", "AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "AWS_SECRET_ACCESS_KEY=" + Mask},
	{"conn string", "conn_string=Server=db;Password=p", "conn_string=" + Mask + ";Password=" + Mask},
	{"header authorization", "Authorization: Bearer x", "Authorization: Bearer " + Mask},
	{"header basic", "Proxy-Authorization: Basic dXNlcjpwYXNz", "Proxy-Authorization: Basic " + Mask},
	{"header x-api-key", "X-Api-Key: abcd1234", "X-Api-Key: " + Mask},
	{"cli flag", "run --api-key=abcd1234 --verbose", "run --api-key=" + Mask + " --verbose"},
	{"cli flag, value after a space", "run --token hunter2hunter2 --verbose", "run --token " + Mask + " --verbose"},
	{"cli flag, value after spaces, at the end", "login --password  s3cret", "login --password  " + Mask},
	{"cli flag, quoted value", `gh auth --with-token "abc def"`, `gh auth --with-token "` + Mask + `"`},
	{"pass=", "mysql -u app pass=hunter2 db", "mysql -u app pass=" + Mask + " db"},
	{"pwd: ", "user: app pwd: hunter2", "user: app pwd: " + Mask},
	{"PASS env", "DB_PASS=hunter2 ./run", "DB_PASS=" + Mask + " ./run"},
	{"camelCase key", `clientSecret: "s3cret value"`, `clientSecret: "` + Mask + `"`},
	{"dotted key", "spring.datasource.password=pw", "spring.datasource.password=" + Mask},
	{"go assignment", "token := load()", "token := " + Mask + ")"}, // ')' ends an unquoted value
	{"unterminated quote", `password: "abc def` + "\nnext", `password: "` + Mask + "\nnext"},
	{"key already masked", "token=" + Mask, "token=" + Mask},

	// Unicode around secrets.
	{"korean around", "비밀번호 password=hunter2 입니다", "비밀번호 password=" + Mask + " 입니다"},
	{"korean adjacent", "키:" + openAIKey + "입니다", "키:" + Mask + "입니다"},
	{"emoji adjacent", "🔑" + awsKeyID + "🔑", "🔑" + Mask + "🔑"},
	{"korean key value", "토큰 token: 한글값 끝", "토큰 token: " + Mask + " 끝"},
}

// cleanCorpus must come out unchanged: ordinary event text.
var cleanCorpus = []string{
	"run --token-file /etc/app/token --verbose",
	"cargo test --tokens 5 -- --nocapture",
	"--token",
	"3 tests pass, 0 fail",
	"",
	"ok",
	"The quick brown fox jumps over the lazy dog.",
	"Setup database: PostgreSQL with JSONB, migrations in src/db/migrations",
	"src/components/authentication/middleware/index.ts",
	"2026-02-17T22:27:00.123Z",
	`{"seq":3,"ts":"2026-02-17T22:27:00Z","type":"phase_start","phase_id":"build","attempt":1}`,
	`{"seq":4,"type":"phase_passed","phase_id":"implement-user-authentication-with-oauth-providers","duration_ms":1200,"cost_usd":0.0021}`,
	`{"type":"phase_failed","phase_id":"test","error":"cargo test failed: 3 tests failed","error_type":"check_failed"}`,
	"phase-1-setup-database-and-run-migrations-v2",
	"run-20260217-2227-coder-auth-task-42-attempt-3",
	"cmd_succeeds: cargo test",
	"HEAD is now at 0123abc, fixed in 9f86d08 and 9f86d081884c",
	"session 550e8400-e29b-41d4-a716-446655440000",
	"edda/sessions/550e8400-e29b-41d4-a716-446655440000/out",
	`{"metrics":{"latency_ms":420,"tokens_in":210,"tokens_out":95,"cost_usd":0.0021}}`,
	`token_usage: {"input_tokens": 10, "output_tokens": 20}`,
	"the Bearer of bad news; a Bearer Token header",
	"password_file=/run/secrets/db token_count=3 secret_name: db",
	"the token was rejected by the secretary",
	"--- FAIL: TestBriefReducerHandlesPhaseFailedWithRetry2 (0.00s)",
	"crates/edda-conductor/src/runner/phase_executor_v2_test.rs:42:7",
	"ERR_CONNECTION_REFUSED_WHILE_CONTACTING_UPSTREAM_SERVER",
	"--------------------------------------------------",
	"==================================================",
	"if token == nil { return } else if a != b && c <= d",
	"https://github.com/fagemx/edda/blob/main/crates/edda-conductor/src/main.rs",
	"std::collections::HashMap",
	"disk-usage and task-runner and risk-assessment",
	"skip: sk-learn is not a key, nor is sk-short",
	"The api key: is described in the docs", // "key" alone is not sensitive
	"임시 파일을 삭제했습니다 (src/db/migrations)",
}

func TestStringTable(t *testing.T) {
	for _, tc := range stringCases {
		t.Run(tc.name, func(t *testing.T) {
			got := String(tc.in)
			if got != tc.want {
				t.Fatalf("String(%q)\n got %q\nwant %q", tc.in, got, tc.want)
			}
			if again := String(got); again != got {
				t.Fatalf("not idempotent: %q -> %q", got, again)
			}
		})
	}
}

func TestStringKeyNamesInEverySyntax(t *testing.T) {
	keys := []string{"api_key", "token", "secret", "password", "authorization", "credential",
		"private_key", "access_key", "secret_key", "conn_string", "passwd"}
	const val = "v4lue-S3cret"
	for _, k := range keys {
		up := strings.ToUpper(k)
		forms := []struct{ in, want string }{
			{fmt.Sprintf(`{"%s": "%s"}`, k, val), fmt.Sprintf(`{"%s": "%s"}`, k, Mask)},
			{fmt.Sprintf(`%s=%s`, k, val), fmt.Sprintf(`%s=%s`, k, Mask)},
			{fmt.Sprintf(`%s: %s`, k, val), fmt.Sprintf(`%s: %s`, k, Mask)},
			{fmt.Sprintf(`export MY_%s=%s`, up, val), fmt.Sprintf(`export MY_%s=%s`, up, Mask)},
			{fmt.Sprintf(`X-%s: %s`, strings.ReplaceAll(k, "_", "-"), val), fmt.Sprintf(`X-%s: %s`, strings.ReplaceAll(k, "_", "-"), Mask)},
			{fmt.Sprintf(`app_%s = "%s"`, k, val), fmt.Sprintf(`app_%s = "%s"`, k, Mask)},
		}
		for _, f := range forms {
			if got := String(f.in); got != f.want {
				t.Errorf("String(%q) = %q, want %q", f.in, got, f.want)
			}
		}
	}
}

func TestStringCleanCorpusUnchanged(t *testing.T) {
	for _, s := range cleanCorpus {
		if got := String(s); got != s {
			t.Errorf("false positive:\n in  %q\n out %q", s, got)
		}
	}
}

func TestSensitiveKey(t *testing.T) {
	yes := []string{"api_key", "API_KEY", "apiKey", "ApiKey", "APIKey", "apikey", "x-api-key", "OPENAI_API_KEY",
		"token", "github_token", "accessToken", "refresh_token", "secret", "clientSecret", "client_secret",
		"password", "db_password", "DB_PASSWORD", "passwd", "authorization", "Proxy-Authorization",
		"credential", "credentials", "private_key", "privateKey", "access_key", "secret_key",
		"conn_string", "connection_string", "spring.datasource.password", "--api-key", "token_id"}
	no := []string{"", "key", "id", "tokens", "tokens_in", "tokens_out", "input_tokens", "max_tokens",
		"token_usage", "TokenUsage", "token_count", "password_file", "secret_name", "secretary",
		"passwordless", "author", "phase_id", "cost_usd", "keyboard", "access", "private", "api"}
	for _, k := range yes {
		if !sensitiveKey(k) {
			t.Errorf("sensitiveKey(%q) = false, want true", k)
		}
	}
	for _, k := range no {
		if sensitiveKey(k) {
			t.Errorf("sensitiveKey(%q) = true, want false", k)
		}
	}
}

func TestStringReturnsInputWhenClean(t *testing.T) {
	s := strings.Repeat("plain words only ", 20)
	allocs := testing.AllocsPerRun(100, func() { _ = String(s) })
	if allocs != 0 {
		t.Fatalf("String on clean text allocated %v times, want 0", allocs)
	}
}

func TestRedactorAllow(t *testing.T) {
	r := New(gitSHA, "")
	in := "commit " + gitSHA + " and " + longHex
	want := "commit " + gitSHA + " and " + Mask
	if got := r.String(in); got != want {
		t.Fatalf("allow list: got %q want %q", got, want)
	}
	if got := String(in); got != "commit "+Mask+" and "+Mask {
		t.Fatalf("package String must ignore allow lists: %q", got)
	}
	var nilR *Redactor
	if got := nilR.String(in); got != "commit "+Mask+" and "+Mask {
		t.Fatalf("nil Redactor: %q", got)
	}
	v := r.Value(map[string]any{"token": gitSHA}).(map[string]any)
	if v["token"] != gitSHA {
		t.Fatalf("allowed value under a sensitive key was masked: %v", v)
	}
}
