package redact

// A key is sensitive when one of its words (split at separators and camelCase
// boundaries, compared case-insensitively) is a sensitive word, or two
// adjacent words form a sensitive pair. Whole-word matching is what keeps
// "tokens_in" (an agent's token metric) and "secretary" readable.

// sensitiveWords are single words that name a secret. The joined forms
// ("apikey") cover keys written without a separator.
var sensitiveWords = [...]string{
	"token", "secret", "secrets", "password", "passwords", "passwd", "pass", "pwd", "passphrase",
	"authorization", "credential", "credentials",
	"apikey", "apikeys", "privatekey", "accesskey", "secretkey", "connstring", "connectionstring",
}

// sensitivePairs are two-word names whose words are harmless alone.
var sensitivePairs = [...][2]string{
	{"api", "key"}, {"private", "key"}, {"access", "key"}, {"secret", "key"},
	{"api", "keys"}, {"private", "keys"}, {"access", "keys"}, {"secret", "keys"},
	{"conn", "string"}, {"connection", "string"},
}

// metaWords, right after a sensitive word, turn the key into a description of
// the secret rather than the secret itself (token_usage is a token count,
// password_file a path, secret_name a name).
var metaWords = [...]string{
	"usage", "count", "counts", "limit", "limits", "budget", "in", "out",
	"total", "used", "estimate", "type", "length", "len", "ttl", "expiry",
	"expires", "expiration", "url", "uri", "endpoint", "file", "path", "env",
	"name",
}

// maxKeyLen bounds the work spent on one key; longer "keys" are not keys.
const maxKeyLen = 128

// maxWords bounds the words examined in one key.
const maxWords = 16

type word struct{ start, end int }

// splitWords cuts key into words at non-alphanumeric bytes, at lower-to-upper
// case changes (apiKey) and before the last capital of an acronym that starts
// a word (APIKey -> API, Key). Digits stay with the letters they touch.
func splitWords(key string, out *[maxWords]word) int {
	n := 0
	start := -1
	for i := 0; i < len(key); i++ {
		c := key[i]
		if !isAlnum(c) {
			if start >= 0 {
				if n == maxWords {
					return n
				}
				out[n] = word{start, i}
				n++
				start = -1
			}
			continue
		}
		if start < 0 {
			start = i
			continue
		}
		p := key[i-1]
		cut := isLower(p) && isUpper(c) ||
			isUpper(p) && isUpper(c) && i+1 < len(key) && isLower(key[i+1])
		if cut {
			if n == maxWords {
				return n
			}
			out[n] = word{start, i}
			n++
			start = i
		}
	}
	if start >= 0 && n < maxWords {
		out[n] = word{start, len(key)}
		n++
	}
	return n
}

func equalFoldASCII(a, b string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := 0; i < len(a); i++ {
		if lower(a[i]) != b[i] {
			return false
		}
	}
	return true
}

func inList(w string, list []string) bool {
	for _, s := range list {
		if equalFoldASCII(w, s) {
			return true
		}
	}
	return false
}

// sensitiveKey reports whether the value under key must be masked.
func sensitiveKey(key string) bool {
	if len(key) < 3 {
		return false
	}
	if len(key) > maxKeyLen {
		// Suffixes carry the meaning (..._PASSWORD); a cut word at the front
		// does not matter.
		key = key[len(key)-maxKeyLen:]
	}
	if !hasKeyTrigram(key) {
		return false
	}
	var ws [maxWords]word
	n := splitWords(key, &ws)
	for i := 0; i < n; i++ {
		w := key[ws[i].start:ws[i].end]
		matched := 0 // number of words the match spans
		if inList(w, sensitiveWords[:]) {
			matched = 1
		} else if i+1 < n {
			next := key[ws[i+1].start:ws[i+1].end]
			for _, p := range sensitivePairs {
				if equalFoldASCII(w, p[0]) && equalFoldASCII(next, p[1]) {
					matched = 2
					break
				}
			}
		}
		if matched == 0 {
			continue
		}
		if after := i + matched; after < n && inList(key[ws[after].start:ws[after].end], metaWords[:]) {
			continue
		}
		return true
	}
	return false
}

// hasKeyTrigram is the cheap filter in front of splitWords: every sensitive
// word or pair contains one of tok, sec, pas, pwd, aut, cre, key or str (case
// aside), and most keys in an event (seq, ts, type, phase_id) contain none.
func hasKeyTrigram(key string) bool {
	for i := 0; i+2 < len(key); i++ {
		var t string
		switch lower(key[i]) {
		case 't':
			t = "ok"
		case 's':
			if lower(key[i+1]) == 'e' {
				t = "ec"
			} else {
				t = "tr"
			}
		case 'p':
			if lower(key[i+1]) == 'w' {
				t = "wd"
			} else {
				t = "as"
			}
		case 'a':
			t = "ut"
		case 'c':
			t = "re"
		case 'k':
			t = "ey"
		default:
			continue
		}
		if lower(key[i+1]) == t[0] && lower(key[i+2]) == t[1] {
			return true
		}
	}
	return false
}
