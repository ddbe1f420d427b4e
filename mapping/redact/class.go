package redact

// Byte classes, looked up once per byte in the hot loop.
const (
	cAlnum = 1 << iota
	cB64   // base64 and base64url alphabet without padding: [A-Za-z0-9+/_-]
	cHex   // [0-9A-Fa-f]
	cIdent // key characters: [A-Za-z0-9_.-]
	cTok   // bearer token characters (RFC 6750 b64token): [A-Za-z0-9._~+/=-]
	cTerm  // ends an unquoted value
	cPfx   // first letter of a known token prefix: s A g x e
)

var class = func() (t [256]uint8) {
	for c := 0; c < 256; c++ {
		b := byte(c)
		alnum := isAlnum(b)
		if alnum {
			t[c] |= cAlnum | cB64 | cIdent | cTok
		}
		if b >= '0' && b <= '9' || b >= 'a' && b <= 'f' || b >= 'A' && b <= 'F' {
			t[c] |= cHex
		}
		switch b {
		case '+', '/':
			t[c] |= cB64 | cTok
		case '-', '_':
			t[c] |= cB64 | cIdent | cTok
		case '.':
			t[c] |= cIdent | cTok
		case '~', '=':
			t[c] |= cTok
		}
		switch b {
		case 's', 'A', 'g', 'x', 'e':
			t[c] |= cPfx
		}
		switch b {
		case ' ', '\t', '\n', '\r', '\v', '\f', ',', ';', '&', ')', ']', '}', '"', '\'', '<', '>', '`', '|':
			t[c] |= cTerm
		}
	}
	return t
}()

func isAlnum(c byte) bool { return isUpper(c) || isLower(c) || isDigit(c) }
func isUpper(c byte) bool { return c >= 'A' && c <= 'Z' }
func isLower(c byte) bool { return c >= 'a' && c <= 'z' }
func isDigit(c byte) bool { return c >= '0' && c <= '9' }

func lower(c byte) byte {
	if isUpper(c) {
		return c + ('a' - 'A')
	}
	return c
}
