package codec

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
)

// Environment variables read by KeysFromEnv.
const (
	EnvKey     = "KARVI_TEMPORAL_CODEC_KEY"
	EnvOldKeys = "KARVI_TEMPORAL_CODEC_OLD_KEYS"
)

// KeySize is the AES-256 key length in bytes.
const KeySize = 32

// Key is one named AES-256 key.
type Key struct {
	// ID names the key in payload metadata: 1-64 of [A-Za-z0-9._-].
	ID string
	// Secret is the 32-byte key.
	Secret []byte
}

// Keys is the key ring of a codec: at most one current key that encrypts,
// and every known key (current included) for decrypting. It is immutable and
// safe for concurrent use.
type Keys struct {
	current *ringKey // nil: encode writes plain payloads
	byID    map[string]*ringKey
}

type ringKey struct {
	id   string
	aead cipher.AEAD
}

// NewKeys builds a key ring. current may be the zero Key (no encryption, only
// decoding with older). An ID may appear twice only with the same secret.
func NewKeys(current Key, older ...Key) (*Keys, error) {
	k := &Keys{byID: map[string]*ringKey{}}
	secrets := map[string][]byte{}
	addKey := func(key Key) (*ringKey, error) {
		if err := validID(key.ID); err != nil {
			return nil, err
		}
		if len(key.Secret) != KeySize {
			return nil, fmt.Errorf("key %q: want %d bytes, got %d", key.ID, KeySize, len(key.Secret))
		}
		if prev, ok := secrets[key.ID]; ok {
			if !slices.Equal(prev, key.Secret) {
				return nil, fmt.Errorf("key id %q is used for two different keys", key.ID)
			}
			return k.byID[key.ID], nil
		}
		block, err := aes.NewCipher(key.Secret)
		if err != nil {
			return nil, fmt.Errorf("key %q: %w", key.ID, err)
		}
		aead, err := cipher.NewGCM(block)
		if err != nil {
			return nil, fmt.Errorf("key %q: %w", key.ID, err)
		}
		rk := &ringKey{id: key.ID, aead: aead}
		secrets[key.ID] = slices.Clone(key.Secret)
		k.byID[key.ID] = rk
		return rk, nil
	}
	if current.ID != "" || current.Secret != nil {
		rk, err := addKey(current)
		if err != nil {
			return nil, fmt.Errorf("current key: %w", err)
		}
		k.current = rk
	}
	for i, o := range older {
		if _, err := addKey(o); err != nil {
			return nil, fmt.Errorf("older key %d: %w", i+1, err)
		}
	}
	if len(k.byID) == 0 {
		return nil, errors.New("no keys given")
	}
	return k, nil
}

// CurrentID is the ID new payloads are encrypted with, or "" when the ring
// only decodes.
func (k *Keys) CurrentID() string {
	if k == nil || k.current == nil {
		return ""
	}
	return k.current.id
}

// IDs lists every key ID the ring can decrypt, sorted.
func (k *Keys) IDs() []string {
	if k == nil {
		return nil
	}
	ids := make([]string, 0, len(k.byID))
	for id := range k.byID {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// ParseKey reads "[ID:]KEY" where KEY is 32 bytes as 64 hex digits or base64.
// Without an ID, DeriveID names the key. Error messages never contain the
// key text.
func ParseKey(s string) (Key, error) {
	s = strings.TrimSpace(s)
	id := ""
	if i := strings.IndexByte(s, ':'); i >= 0 {
		id, s = strings.TrimSpace(s[:i]), strings.TrimSpace(s[i+1:])
		if err := validID(id); err != nil {
			return Key{}, err
		}
	}
	if s == "" {
		return Key{}, errors.New("empty key")
	}
	secret, err := decodeSecret(s)
	if err != nil {
		return Key{}, err
	}
	if id == "" {
		id = DeriveID(secret)
	}
	return Key{ID: id, Secret: secret}, nil
}

func decodeSecret(s string) ([]byte, error) {
	if len(s) == 2*KeySize {
		if b, err := hex.DecodeString(s); err == nil {
			return b, nil
		}
	}
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.URLEncoding, base64.RawStdEncoding, base64.RawURLEncoding} {
		if b, err := enc.DecodeString(s); err == nil {
			if len(b) != KeySize {
				return nil, fmt.Errorf("key is %d bytes, want %d (generate one with: openssl rand -base64 32)", len(b), KeySize)
			}
			return b, nil
		}
	}
	return nil, fmt.Errorf("key is neither %d hex digits nor base64 of %d bytes (generate one with: openssl rand -base64 32)", 2*KeySize, KeySize)
}

// DeriveID names a key after a hash of it, so processes that share a key
// agree on its ID without configuring one. The hash reveals nothing usable
// about a random 256-bit key.
func DeriveID(secret []byte) string {
	h := sha256.New()
	h.Write([]byte("karvi-temporal-codec key id\x00"))
	h.Write(secret)
	return "k-" + hex.EncodeToString(h.Sum(nil)[:6])
}

func validID(id string) error {
	if id == "" || len(id) > 64 {
		return fmt.Errorf("key id %q: want 1-64 characters", id)
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return fmt.Errorf("key id %q: only letters, digits, '.', '_' and '-' are allowed", id)
		}
	}
	return nil
}

// KeysFromEnv reads EnvKey and EnvOldKeys. Both unset or empty: nil, nil
// (the codec is off). Errors name the variable at fault.
func KeysFromEnv() (*Keys, error) {
	return keysFrom(os.Getenv)
}

func keysFrom(getenv func(string) string) (*Keys, error) {
	cur := strings.TrimSpace(getenv(EnvKey))
	old := strings.TrimSpace(getenv(EnvOldKeys))
	if cur == "" && old == "" {
		return nil, nil
	}
	var current Key
	if cur != "" {
		k, err := ParseKey(cur)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", EnvKey, err)
		}
		current = k
	}
	var older []Key
	for i, f := range strings.FieldsFunc(old, func(r rune) bool { return r == ',' || r == ' ' || r == '\n' || r == '\t' }) {
		k, err := ParseKey(f)
		if err != nil {
			return nil, fmt.Errorf("%s: entry %d: %w", EnvOldKeys, i+1, err)
		}
		older = append(older, k)
	}
	keys, err := NewKeys(current, older...)
	if err != nil {
		return nil, fmt.Errorf("%s/%s: %w", EnvKey, EnvOldKeys, err)
	}
	return keys, nil
}
