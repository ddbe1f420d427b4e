package redact

import (
	"strings"
)

// minTrigger is the shortest text that can hold anything to mask ("token=x").
const minTrigger = 7

// span is a byte range of the input that the output replaces with Mask.
type span struct{ start, end int }

// scanner finds the spans to mask in one string. It walks the text once:
// runs of base64 characters are checked for token prefixes, "Bearer" and
// length; every '=' and ':' looks back for a sensitive key. PEM blocks are
// found first with strings.Index, which is cheap when there are none.
type scanner struct {
	s     string
	allow map[string]struct{}
	spans []span // nil until the first secret: clean text allocates nothing
	pem   []span
}

func (sc *scanner) add(start, end int) {
	if end <= start {
		return
	}
	if sc.allow != nil {
		if _, ok := sc.allow[sc.s[start:end]]; ok {
			return
		}
	}
	sc.spans = append(sc.spans, span{start, end})
}

func (sc *scanner) scan() {
	s := sc.s
	n := len(s)
	if strings.Contains(s, "-----BEGIN ") {
		sc.findPEM()
	}
	pi := 0
	for i := 0; i < n; {
		if pi < len(sc.pem) && i >= sc.pem[pi].start {
			if i < sc.pem[pi].end {
				i = sc.pem[pi].end
			}
			pi++
			continue
		}
		limit := n
		if pi < len(sc.pem) {
			limit = sc.pem[pi].start
		}
		c := s[i]
		switch {
		case c == '-' && i+2 < limit && s[i+1] == '-' && (i == 0 || !isAlnum(s[i-1]) && s[i-1] != '-'):
			if end := sc.flag(i, limit); end > i {
				i = end
			} else {
				i = sc.run(i, limit)
			}
		case class[c]&cB64 != 0:
			i = sc.run(i, limit)
		case c == '=' || c == ':':
			i = sc.keyValue(i)
		default:
			i++
		}
	}
}

// findPEM records every private key block: from "-----BEGIN ... PRIVATE
// KEY-----" through its END line, or to the end of the text when the block is
// cut off (a truncated key is still a key).
func (sc *scanner) findPEM() {
	s := sc.s
	const begin = "-----BEGIN "
	for from := 0; from < len(s); {
		k := strings.Index(s[from:], begin)
		if k < 0 {
			return
		}
		start := from + k
		labelAt := start + len(begin)
		e := strings.Index(s[labelAt:], "-----")
		if e < 0 || e > 64 || !privateKeyLabel(s[labelAt:labelAt+e]) {
			from = labelAt
			continue
		}
		body := labelAt + e + len("-----")
		end := pemEnd(s, body)
		sc.pem = append(sc.pem, span{start, end})
		sc.add(start, end)
		from = end
	}
}

// pemEnd returns where the block whose body starts at body ends: just past
// the first END line that carries a private key label, or the end of the text.
// An END line without one ("-----END -----BEGIN ...") does not close the
// block, or the key behind it would escape as the text after a closed block.
func pemEnd(s string, body int) int {
	const endLine = "-----END "
	for from := body; ; {
		m := strings.Index(s[from:], endLine)
		if m < 0 {
			return len(s)
		}
		tail := from + m + len(endLine)
		if t := strings.Index(s[tail:], "-----"); t >= 0 && t <= 64 && privateKeyLabel(s[tail:tail+t]) {
			return tail + t + len("-----")
		}
		from = tail
	}
}

// privateKeyLabel accepts the RSA, EC and OPENSSH private key labels and the
// others of the same family (PKCS#8 "PRIVATE KEY", "ENCRYPTED
// PRIVATE KEY", "DSA PRIVATE KEY"); public keys and certificates are not
// secret and stay.
func privateKeyLabel(l string) bool {
	if !strings.HasSuffix(l, "PRIVATE KEY") {
		return false
	}
	for i := 0; i < len(l); i++ {
		if !isUpper(l[i]) && !isDigit(l[i]) && l[i] != ' ' {
			return false
		}
	}
	return true
}

// run handles the maximal run of base64 characters that starts at i and
// returns where scanning continues.
func (sc *scanner) run(i, limit int) int {
	s := sc.s
	j := i
	var prev uint8 // class of s[j-1]
	if i > 0 {
		prev = class[s[i-1]]
	}
	for j < limit {
		cl := class[s[j]]
		if cl&cB64 == 0 {
			break
		}
		if cl&cPfx != 0 && prev&cAlnum == 0 {
			if end := prefixToken(s, j); end > j {
				sc.add(j, end)
				return end
			}
		}
		prev = cl
		j++
	}
	if j-i == 6 && j < len(s) && (s[j] == ' ' || s[j] == '\t') && strings.EqualFold(s[i:j], "bearer") {
		return sc.bearer(j)
	}
	if j-i < minLongRun {
		return j
	}
	if looksRandom(s[i:j]) {
		end := j
		// Padding belongs to the token, but only when masking: '=' after an
		// ordinary word is a key=value separator.
		for k := 0; k < 2 && end < limit && s[end] == '='; k++ {
			end++
		}
		sc.add(i, end)
		return end
	}
	sc.longPieces(i, j)
	return j
}

// longPieces looks inside a long run that is not random as a whole (a path
// or id with a secret in it): 40+ hex runs bounded by non-alphanumerics, and
// '/'-separated pieces that are random on their own.
func (sc *scanner) longPieces(i, j int) {
	s := sc.s
	for k := i; k < j; {
		if class[s[k]]&cHex == 0 || (k > i && isAlnum(s[k-1])) {
			k++
			continue
		}
		m := k
		for m < j && class[s[m]]&cHex != 0 {
			m++
		}
		if m-k >= minLongRun && (m == j || !isAlnum(s[m])) {
			sc.add(k, m)
		}
		k = m
	}
	if strings.IndexByte(s[i:j], '/') < 0 {
		return
	}
	for k := i; k < j; {
		m := k
		for m < j && s[m] != '/' {
			m++
		}
		if m-k >= minLongRun && looksRandom(s[k:m]) {
			sc.add(k, m)
		}
		k = m + 1
	}
}

// bearer masks the token after "Bearer " unless it is a plain word ("the
// Bearer Token header" is prose). j is just after "Bearer".
func (sc *scanner) bearer(j int) int {
	s := sc.s
	k := j
	for k < len(s) && (s[k] == ' ' || s[k] == '\t') {
		k++
	}
	m := k
	for m < len(s) && class[s[m]]&cTok != 0 {
		m++
	}
	for m > k && s[m-1] == '.' { // sentence end, not token
		m--
	}
	if m > k && !plainWord(s[k:m]) && !isKeyWord(s[k:m]) {
		sc.add(k, m)
		return m
	}
	return k
}

// prefixToken returns the end of a known credential format starting at p, or
// p when there is none. Minimum lengths keep ordinary words that happen to
// share a prefix ("sk-learn", "AKIA" alone) out.
func prefixToken(s string, p int) int {
	rest := s[p:]
	switch rest[0] {
	case 's':
		// OpenAI / Anthropic keys: sk-..., sk-proj-..., sk-ant-api03-...
		if strings.HasPrefix(rest, "sk-") {
			e := extent(s, p+3, alnumDashUnderscore)
			if e-(p+3) >= 20 && hasDigitOrUpper(s[p+3:e]) {
				return e
			}
		}
	case 'A':
		// AWS access key id (AKIA long-term, ASIA temporary): 16 more of [A-Z0-9].
		if strings.HasPrefix(rest, "AKIA") || strings.HasPrefix(rest, "ASIA") {
			e := extent(s, p+4, upperDigit)
			if e-(p+4) >= 16 {
				return extent(s, e, alnumOnly)
			}
		}
		// Google API key: AIza + 35 of [A-Za-z0-9_-].
		if strings.HasPrefix(rest, "AIza") {
			e := extent(s, p+4, alnumDashUnderscore)
			if e-(p+4) >= 30 {
				return e
			}
		}
	case 'g':
		// GitHub tokens: ghp_ (personal), gho_ (OAuth), ghu_ (user-to-server),
		// and the siblings ghs_ (server) and ghr_ (refresh); github_pat_
		// (fine-grained); GitLab glpat-.
		if len(rest) > 4 && rest[0] == 'g' && rest[1] == 'h' && rest[3] == '_' &&
			strings.IndexByte("pousr", rest[2]) >= 0 {
			e := extent(s, p+4, alnumOnly)
			if e-(p+4) >= 20 {
				return e
			}
		}
		if strings.HasPrefix(rest, "github_pat_") {
			e := extent(s, p+11, alnumDashUnderscore)
			if e-(p+11) >= 20 {
				return e
			}
		}
		if strings.HasPrefix(rest, "glpat-") {
			e := extent(s, p+6, alnumDashUnderscore)
			if e-(p+6) >= 20 {
				return e
			}
		}
	case 'x':
		// Slack tokens: xoxb-, xoxp-, xoxa-, xoxr-, xoxs-.
		if len(rest) > 5 && strings.HasPrefix(rest, "xox") && rest[4] == '-' &&
			strings.IndexByte("abprs", rest[3]) >= 0 {
			e := extent(s, p+5, alnumDashUnderscore)
			if e-(p+5) >= 10 {
				return e
			}
		}
	case 'e':
		// JWT: base64url JSON header ("eyJ") . payload . signature.
		if strings.HasPrefix(rest, "eyJ") {
			e := extent(s, p, jwtChars)
			for e > p && s[e-1] == '.' {
				e--
			}
			if e-p >= 30 && strings.Count(s[p:e], ".") == 2 {
				return e
			}
		}
	}
	return p
}

type charset int

const (
	alnumOnly charset = iota
	alnumDashUnderscore
	upperDigit
	jwtChars
)

func extent(s string, i int, set charset) int {
	for ; i < len(s); i++ {
		c := s[i]
		var ok bool
		switch set {
		case alnumOnly:
			ok = isAlnum(c)
		case alnumDashUnderscore:
			ok = isAlnum(c) || c == '-' || c == '_'
		case upperDigit:
			ok = isUpper(c) || isDigit(c)
		case jwtChars:
			ok = isAlnum(c) || c == '-' || c == '_' || c == '.'
		}
		if !ok {
			return i
		}
	}
	return len(s)
}

func hasDigitOrUpper(t string) bool {
	for i := 0; i < len(t); i++ {
		if isDigit(t[i]) || isUpper(t[i]) {
			return true
		}
	}
	return false
}

// keyValue handles the '=' or ':' at k: when the word before it is a
// sensitive key, the value after it is masked and scanning resumes after the
// value. Comparisons (==, !=, <=, >=), Rust paths (::) and URL schemes (://)
// are not assignments; a URL's user info is checked for a password instead.
func (sc *scanner) keyValue(k int) int {
	s := sc.s
	n := len(s)
	v := k + 1
	if s[k] == ':' {
		switch {
		case k > 0 && s[k-1] == ':':
			return k + 1
		case v < n && s[v] == ':':
			return v + 1
		case v+1 < n && s[v] == '/' && s[v+1] == '/':
			return sc.userinfo(v + 2)
		case v < n && s[v] == '=': // :=
			v++
		}
	} else {
		if v < n && s[v] == '=' {
			return v + 1
		}
		if k > 0 && strings.IndexByte("!<>=", s[k-1]) >= 0 {
			return k + 1
		}
	}

	// The key: optional spaces, an optional closing quote (escaped in JSON
	// that sits inside a string), then key characters.
	j := k
	for j > 0 && k-j < 8 && (s[j-1] == ' ' || s[j-1] == '\t') {
		j--
	}
	if j > 0 && (s[j-1] == '"' || s[j-1] == '\'') {
		j--
		if j > 0 && s[j-1] == '\\' {
			j--
		}
	}
	ke := j
	for j > 0 && ke-j < maxKeyLen && class[s[j-1]]&cIdent != 0 {
		j--
	}
	if ke-j < 3 || !sensitiveKey(s[j:ke]) {
		return k + 1
	}

	for v < n && (s[v] == ' ' || s[v] == '\t') {
		v++
	}
	if v >= n {
		return n
	}
	switch s[v] {
	case '\n', '\r':
		return v
	case '"', '\'':
		q := s[v]
		start := v + 1
		if e := closingQuote(s, start, q); e >= 0 {
			sc.add(start, e)
			return e + 1
		}
		// Unterminated (a truncated preview): the rest of the line.
		end := lineEnd(s, start)
		sc.add(start, end)
		return end
	case '\\':
		if v+1 < n && s[v+1] == '"' { // \"value\" inside a JSON string
			start := v + 2
			e := strings.Index(s[start:], `\"`)
			if e < 0 {
				sc.add(start, n)
				return n
			}
			sc.add(start, start+e)
			return start + e + 2
		}
	case '{', '[':
		end := balanced(s, v)
		sc.add(v, end)
		return end
	}
	e := v
	for e < n && class[s[e]]&cTerm == 0 {
		e++
	}
	v, e = pastScheme(s, v, e, n)
	// "token: pwd: x": the value is itself a sensitive key; leave it to
	// mask its own value, or that value would survive behind this one.
	if isKeyWord(s[v:e]) {
		return v
	}
	sc.add(v, e)
	return e
}

// pastScheme moves the value word s[v:e] past auth scheme names
// ("Authorization: Bearer x", "--token Bearer x"): keep the scheme, mask
// the credential, the first word that is not itself a scheme name.
func pastScheme(s string, v, e, limit int) (int, int) {
	for e < limit && (s[e] == ' ' || s[e] == '\t') && authScheme(s[v:e]) {
		c := e
		for c < limit && (s[c] == ' ' || s[c] == '\t') {
			c++
		}
		ce := c
		for ce < limit && class[s[ce]]&cTerm == 0 {
			ce++
		}
		if ce == c {
			break
		}
		v, e = c, ce
	}
	return v, e
}

// isKeyWord reports a word that is a sensitive key and its separator,
// such as "pwd:" or "password=", or a sensitive flag such as "--token".
func isKeyWord(w string) bool {
	var k string
	switch {
	case strings.HasPrefix(w, "--"): // "--token": a flag masks its own value
		k = w[2:]
	case len(w) > 1 && (w[len(w)-1] == ':' || w[len(w)-1] == '='):
		k = w[:len(w)-1]
	}
	if len(k) < 3 {
		return false
	}
	for i := 0; i < len(k); i++ {
		if class[k[i]]&cIdent == 0 {
			return false
		}
	}
	return sensitiveKey(k)
}

func authScheme(w string) bool {
	switch len(w) {
	case 3:
		return strings.EqualFold(w, "bot")
	case 5:
		return strings.EqualFold(w, "basic") || strings.EqualFold(w, "token")
	case 6:
		return strings.EqualFold(w, "bearer") || strings.EqualFold(w, "digest")
	}
	return false
}

// userinfo masks the password of scheme://user:password@host; p is just after
// "//". A connection string is the usual place a password hides in a log.
func (sc *scanner) userinfo(p int) int {
	s := sc.s
	colon := -1
	for i := p; i < len(s) && i-p < 256; i++ {
		switch c := s[i]; {
		case c == '@':
			if colon >= 0 && i > colon+1 {
				sc.add(colon+1, i)
				return i + 1
			}
			return p
		case c == ':':
			if colon < 0 {
				colon = i
			}
		case c == '/' || c == '?' || c == '#' || class[c]&cTerm != 0:
			return p
		}
	}
	return p
}

// closingQuote returns the index of the quote that closes a string opened
// just before start, honouring backslash escapes, or -1.
func closingQuote(s string, start int, q byte) int {
	for i := start; i < len(s); i++ {
		switch s[i] {
		case '\\':
			i++
		case q:
			return i
		}
	}
	return -1
}

func lineEnd(s string, i int) int {
	if e := strings.IndexAny(s[i:], "\r\n"); e >= 0 {
		return i + e
	}
	return len(s)
}

// balanced returns the index after the bracket that closes the one at v (or
// the end of the text), skipping brackets inside double-quoted strings.
func balanced(s string, v int) int {
	depth := 0
	for i := v; i < len(s); i++ {
		switch s[i] {
		case '"':
			e := closingQuote(s, i+1, '"')
			if e < 0 {
				return len(s)
			}
			i = e
		case '{', '[':
			depth++
		case '}', ']':
			depth--
			if depth == 0 {
				return i + 1
			}
		}
	}
	return len(s)
}

// apply returns s with every span replaced by Mask; overlapping and touching
// spans become one Mask.
func (sc *scanner) apply() string {
	sp := sc.spans
	// Spans arrive nearly sorted (PEM blocks first): insertion sort.
	for a := 1; a < len(sp); a++ {
		for b := a; b > 0 && sp[b].start < sp[b-1].start; b-- {
			sp[b], sp[b-1] = sp[b-1], sp[b]
		}
	}
	var out strings.Builder
	out.Grow(len(sc.s))
	pos := 0
	for a := 0; a < len(sp); {
		start, end := sp[a].start, sp[a].end
		for a++; a < len(sp) && sp[a].start <= end; a++ {
			end = max(end, sp[a].end)
		}
		if start < pos { // cannot happen after merging; keeps output sane
			start = pos
		}
		out.WriteString(sc.s[pos:start])
		out.WriteString(Mask)
		pos = end
	}
	out.WriteString(sc.s[pos:])
	return out.String()
}

// flag handles a command-line flag at i ("--token X"): when its name is a
// sensitive key and a value follows after spaces, the value is masked and
// scanning resumes after it; otherwise it returns i and the flag is
// scanned as any other text ("--token=X" is a key=value).
func (sc *scanner) flag(i, limit int) int {
	s := sc.s
	j := i + 2
	for j < limit && j-i < maxKeyLen && class[s[j]]&cIdent != 0 {
		j++
	}
	if j-i-2 < 3 || !sensitiveKey(s[i+2:j]) {
		return i
	}
	v := j
	for v < limit && (s[v] == ' ' || s[v] == '\t') {
		v++
	}
	if v == j || v >= limit || s[v] == '-' {
		return i // no value: another flag, or the end
	}
	if q := s[v]; q == '"' || q == '\'' {
		if e := closingQuote(s, v+1, q); e >= 0 {
			sc.add(v+1, e)
			return e + 1
		}
		e := lineEnd(s, v+1)
		sc.add(v+1, e)
		return e
	}
	e := v
	for e < limit && class[s[e]]&cTerm == 0 {
		e++
	}
	if e == v {
		return i
	}
	v, e = pastScheme(s, v, e, limit)
	if isKeyWord(s[v:e]) { // "--token pwd: x": the key masks its own value
		return v
	}
	sc.add(v, e)
	return e
}
