package redact

import (
	"strings"
	"testing"
)

// plant builds a secret of the given kind from arbitrary fuzz bytes, so the
// fuzzer explores the secret's body as well as its surroundings. It returns
// the text to embed and the part of it that must never reach the output.
func plant(kind uint8, body string) (text, secret string) {
	const alnum = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
	const upperDigit = "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
	const hex = "0123456789abcdef"
	pick := func(alphabet string, n int) string {
		var b strings.Builder
		for i := 0; i < n; i++ {
			c := byte(i*7 + 3)
			if i < len(body) {
				c = body[i]
			}
			b.WriteByte(alphabet[int(c)%len(alphabet)])
		}
		return b.String()
	}
	switch kind % 13 {
	case 0:
		s := "sk-Q7" + pick(alnum, 30)
		return s, s
	case 1:
		s := "AKIA" + pick(upperDigit, 16)
		return s, s
	case 2:
		s := "AIza" + pick(alnum, 35)
		return s, s
	case 3:
		s := "ghp_" + pick(alnum, 36)
		return s, s
	case 4:
		s := "gho_" + pick(alnum, 36)
		return s, s
	case 5:
		s := "ghu_" + pick(alnum, 36)
		return s, s
	case 6:
		tok := "Zq9" + pick(alnum, 20)
		return "Bearer " + tok, tok
	case 7:
		s := pick(hex, 40+len(body)%30)
		return s, s
	case 8:
		v := "Zq9" + pick(alnum, 12)
		return "db_password=" + v, v
	case 10:
		v := "Zq9" + pick(alnum, 12)
		return "--token " + v, v
	case 11:
		v := "Zq9" + pick(alnum, 12)
		return "pass=" + v, v
	case 12:
		v := "Zq9" + pick(alnum, 12)
		return "pwd: " + v, v
	default:
		b := pick(alnum, 48)
		return "-----BEGIN RSA PRIVATE KEY-----\n" + b + "\n-----END RSA PRIVATE KEY-----", b
	}
}

func FuzzString(f *testing.F) {
	for _, tc := range stringCases {
		f.Add(tc.in, uint8(0), "", "")
	}
	for i, s := range cleanCorpus {
		f.Add(s, uint8(i), s, s)
	}
	f.Add("token: ", uint8(8), "x", `"`)
	f.Add(`{"api_key": "`, uint8(0), "", `"}`)
	f.Fuzz(func(t *testing.T, prefix string, kind uint8, body, suffix string) {
		// Arbitrary text: never panics, idempotent.
		out := String(prefix)
		if again := String(out); again != out {
			t.Fatalf("not idempotent on %q:\n once  %q\n twice %q", prefix, out, again)
		}

		// A planted secret, set off by spaces so that no rule needs the
		// surroundings to see it, never survives.
		text, secret := plant(kind, body)
		in := prefix + " " + text + " " + suffix
		out = String(in)
		if again := String(out); again != out {
			t.Fatalf("not idempotent on %q:\n once  %q\n twice %q", in, out, again)
		}
		if strings.Contains(prefix, secret) || strings.Contains(suffix, secret) {
			return // the fuzzer copied the secret where it is not one
		}
		if strings.Contains(out, secret) {
			t.Fatalf("secret %q survived in %q (input %q)", secret, out, in)
		}
	})
}
