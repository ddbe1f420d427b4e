package redact

// minLongRun is the length from which a run of hex or base64 characters is
// a candidate secret (docs/contract.md §9).
const minLongRun = 40

// looksRandom decides whether a run of base64-alphabet characters (at least
// minLongRun long) is a credential rather than a long identifier, path or
// kebab-case id.
//
// Pure hex is always random here: every long hex run is masked, git SHAs
// included. Otherwise the run is cut into segments at - _ / + and the
// pure-hex segments are set aside (UUIDs and dates inside paths are not
// evidence of a secret). In what remains, random text betrays itself in two
// ways that words do not:
//   - letters and digits alternate often (base36, base32, mixed-case base64
//     alike), while identifiers keep digits in a few short numbers;
//   - with both cases present, lowercase runs are short (mean 1.7 in random
//     base64) while camelCase words give runs of 3 and more.
//
// Measured on 50,000 random strings each: 40 characters of base64, base64url,
// base62 or base36 are missed in under 0.5% of cases, 64 characters in under
// 0.1%; base32 (uppercase and 2-7) is missed 7% at 40 and 1% at 100.
func looksRandom(run string) bool {
	if isAllHex(run) {
		return true
	}
	alnum, transitions, uppers, lowers, lowerRuns := 0, 0, 0, 0, 0
	for i := 0; i < len(run); {
		for i < len(run) && !isAlnum(run[i]) {
			i++
		}
		j := i
		for j < len(run) && isAlnum(run[j]) {
			j++
		}
		seg := run[i:j]
		if len(seg) > 0 && !isAllHex(seg) {
			var prev byte
			for k := 0; k < len(seg); k++ {
				c := seg[k]
				alnum++
				if isUpper(c) {
					uppers++
				} else if isLower(c) {
					lowers++
					if k == 0 || !isLower(prev) {
						lowerRuns++
					}
				}
				if k > 0 && isDigit(prev) != isDigit(c) {
					transitions++
				}
				prev = c
			}
		}
		i = j
	}
	if alnum == 0 {
		return false
	}
	if transitions >= 4 && transitions*6 >= alnum {
		return true
	}
	// mean lowercase run length < 2.8, kept in integers.
	return uppers > 0 && lowerRuns >= 4 && lowers*5 < lowerRuns*14
}

func isAllHex(s string) bool {
	for i := 0; i < len(s); i++ {
		if class[s[i]]&cHex == 0 {
			return false
		}
	}
	return true
}

// plainWord reports whether t is an ordinary word (lowercase, UPPERCASE or
// Capitalized letters only), which after "Bearer" is English, not a token.
func plainWord(t string) bool {
	if t == "" {
		return true
	}
	for i := 0; i < len(t); i++ {
		if !isUpper(t[i]) && !isLower(t[i]) {
			return false
		}
	}
	allUpper, restLower := true, true
	for i := 0; i < len(t); i++ {
		if !isUpper(t[i]) {
			allUpper = false
		}
		if i > 0 && !isLower(t[i]) {
			restLower = false
		}
	}
	return allUpper || restLower
}
