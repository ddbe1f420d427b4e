package codec

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"strings"
	"testing"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/converter"
	"google.golang.org/protobuf/proto"
)

func randomSecret(t *testing.T) []byte {
	t.Helper()
	b := make([]byte, KeySize)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return b
}

func mustKeys(t *testing.T, current Key, older ...Key) *Keys {
	t.Helper()
	k, err := NewKeys(current, older...)
	if err != nil {
		t.Fatalf("NewKeys: %v", err)
	}
	return k
}

func key(t *testing.T, id string) Key {
	return Key{ID: id, Secret: randomSecret(t)}
}

const plaintext = "karvi brief: phase build passed, token=do-not-leak-0123456789"

func payloads(t *testing.T) []*commonpb.Payload {
	t.Helper()
	dc := converter.GetDefaultDataConverter()
	p1, err := dc.ToPayload(map[string]any{"brief": plaintext})
	if err != nil {
		t.Fatal(err)
	}
	p2, err := dc.ToPayload([]byte(plaintext))
	if err != nil {
		t.Fatal(err)
	}
	p3, err := dc.ToPayload(nil)
	if err != nil {
		t.Fatal(err)
	}
	return []*commonpb.Payload{p1, p2, p3}
}

func TestRoundTrip(t *testing.T) {
	c := NewCodec(mustKeys(t, key(t, "k1")))
	in := payloads(t)
	enc, err := c.Encode(in)
	if err != nil {
		t.Fatal(err)
	}
	if len(enc) != len(in) {
		t.Fatalf("got %d payloads, want %d", len(enc), len(in))
	}
	for i, p := range enc {
		if got := string(p.Metadata[converter.MetadataEncoding]); got != MetadataEncodingEncrypted {
			t.Fatalf("payload %d encoding %q", i, got)
		}
		if got := string(p.Metadata[MetadataKeyID]); got != "k1" {
			t.Fatalf("payload %d key id %q", i, got)
		}
		if proto.Equal(p, in[i]) {
			t.Fatalf("payload %d not changed", i)
		}
	}
	dec, err := c.Decode(enc)
	if err != nil {
		t.Fatal(err)
	}
	for i := range in {
		if !proto.Equal(dec[i], in[i]) {
			t.Fatalf("payload %d: got %v want %v", i, dec[i], in[i])
		}
	}
	// Encode must not touch its input.
	if !proto.Equal(in[0], payloads(t)[0]) {
		t.Fatal("Encode modified its input")
	}
}

func TestCiphertextHasNoPlaintext(t *testing.T) {
	c := NewCodec(mustKeys(t, key(t, "k1")))
	in := payloads(t)
	enc, err := c.Encode(in)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := proto.Marshal(&commonpb.Payloads{Payloads: enc})
	if err != nil {
		t.Fatal(err)
	}
	for _, needle := range []string{"token=do-not-leak", "karvi brief", "json/plain", "binary/plain", "binary/null"} {
		if bytes.Contains(raw, []byte(needle)) {
			t.Fatalf("encoded payloads contain %q", needle)
		}
	}
	// Two encodings of the same value differ (random nonce).
	enc2, _ := c.Encode(in)
	if bytes.Equal(enc[0].Data, enc2[0].Data) {
		t.Fatal("same ciphertext twice: nonce reuse")
	}
}

func TestWrongKey(t *testing.T) {
	in := payloads(t)
	enc, err := NewCodec(mustKeys(t, key(t, "k1"))).Encode(in)
	if err != nil {
		t.Fatal(err)
	}
	// Same id, different secret: authentication fails.
	_, err = NewCodec(mustKeys(t, key(t, "k1"))).Decode(enc)
	if !errors.Is(err, ErrDecrypt) || !strings.Contains(err.Error(), `key "k1"`) {
		t.Fatalf("same id, other key: got %v", err)
	}
	// Unknown id: says which id and where keys come from.
	_, err = NewCodec(mustKeys(t, key(t, "k2"))).Decode(enc)
	if !errors.Is(err, ErrUnknownKey) || !strings.Contains(err.Error(), `"k1"`) || !strings.Contains(err.Error(), EnvOldKeys) {
		t.Fatalf("unknown id: got %v", err)
	}
	// No keys at all.
	_, err = NewCodec(nil).Decode(enc)
	if !errors.Is(err, ErrUnknownKey) || !strings.Contains(err.Error(), EnvKey) {
		t.Fatalf("no keys: got %v", err)
	}
	// Metadata edited to name another known key: the tag covers the id.
	k1, k2 := key(t, "k1"), key(t, "k2")
	ring := mustKeys(t, k1, k2)
	enc, _ = NewCodec(ring).Encode(in)
	forged := proto.Clone(enc[0]).(*commonpb.Payload)
	forged.Metadata[MetadataKeyID] = []byte("k2")
	if _, err := NewCodec(ring).Decode([]*commonpb.Payload{forged}); !errors.Is(err, ErrDecrypt) {
		t.Fatalf("forged key id: got %v", err)
	}
	// Flipped bit.
	bad := proto.Clone(enc[0]).(*commonpb.Payload)
	bad.Data[len(bad.Data)-1] ^= 1
	if _, err := NewCodec(ring).Decode([]*commonpb.Payload{bad}); !errors.Is(err, ErrDecrypt) {
		t.Fatalf("corrupted: got %v", err)
	}
	short := proto.Clone(enc[0]).(*commonpb.Payload)
	short.Data = short.Data[:5]
	if _, err := NewCodec(ring).Decode([]*commonpb.Payload{short}); !errors.Is(err, ErrDecrypt) {
		t.Fatalf("short: got %v", err)
	}
}

func TestUnencryptedPassThrough(t *testing.T) {
	in := payloads(t)
	for _, c := range []converter.PayloadCodec{NewCodec(mustKeys(t, key(t, "k1"))), NewCodec(nil)} {
		dec, err := c.Decode(in)
		if err != nil {
			t.Fatal(err)
		}
		for i := range in {
			if dec[i] != in[i] {
				t.Fatalf("payload %d was not passed through", i)
			}
		}
	}
	// A codec without a current key writes plain payloads.
	enc, err := NewCodec(nil).Encode(in)
	if err != nil || &enc[0] != &in[0] {
		t.Fatalf("nil keys should pass through: %v", err)
	}
}

func TestKeyRotation(t *testing.T) {
	old, cur := key(t, "2025-01"), key(t, "2026-02")
	oldEnc, err := NewCodec(mustKeys(t, old)).Encode(payloads(t))
	if err != nil {
		t.Fatal(err)
	}
	rotated := mustKeys(t, cur, old)
	newEnc, err := NewCodec(rotated).Encode(payloads(t))
	if err != nil {
		t.Fatal(err)
	}
	if got := string(newEnc[0].Metadata[MetadataKeyID]); got != "2026-02" {
		t.Fatalf("new payloads use %q", got)
	}
	mixed := []*commonpb.Payload{oldEnc[0], newEnc[1], payloads(t)[2]}
	dec, err := NewCodec(rotated).Decode(mixed)
	if err != nil {
		t.Fatal(err)
	}
	want := payloads(t)
	for i := range dec {
		if !proto.Equal(dec[i], want[i]) {
			t.Fatalf("payload %d: %v", i, dec[i])
		}
	}
	// Decode-only ring (encryption turned off, old key retained).
	readOnly := mustKeys(t, Key{}, old, cur)
	if readOnly.CurrentID() != "" {
		t.Fatal("decode-only ring has a current key")
	}
	if _, err := NewCodec(readOnly).Decode(mixed); err != nil {
		t.Fatal(err)
	}
	plain, _ := NewCodec(readOnly).Encode(want)
	if string(plain[0].Metadata[converter.MetadataEncoding]) == MetadataEncodingEncrypted {
		t.Fatal("decode-only ring encrypted")
	}
}

func TestNewKeysErrors(t *testing.T) {
	s := randomSecret(t)
	cases := map[string]func() error{
		"short secret": func() error { _, err := NewKeys(Key{ID: "a", Secret: s[:16]}); return err },
		"bad id":       func() error { _, err := NewKeys(Key{ID: "a b", Secret: s}); return err },
		"dup id": func() error {
			_, err := NewKeys(Key{ID: "a", Secret: s}, Key{ID: "a", Secret: randomSecret(t)})
			return err
		},
		"nothing": func() error { _, err := NewKeys(Key{}); return err },
	}
	for name, f := range cases {
		if f() == nil {
			t.Errorf("%s: no error", name)
		}
	}
	if _, err := NewKeys(Key{ID: "a", Secret: s}, Key{ID: "a", Secret: s}); err != nil {
		t.Errorf("same key twice is fine: %v", err)
	}
}

func TestParseKey(t *testing.T) {
	s := randomSecret(t)
	for _, text := range []string{
		hex.EncodeToString(s),
		strings.ToUpper(hex.EncodeToString(s)),
		base64.StdEncoding.EncodeToString(s),
		base64.RawStdEncoding.EncodeToString(s),
		base64.URLEncoding.EncodeToString(s),
		"  " + base64.RawURLEncoding.EncodeToString(s) + "\n",
	} {
		k, err := ParseKey(text)
		if err != nil {
			t.Fatalf("ParseKey(%q): %v", text, err)
		}
		if !bytes.Equal(k.Secret, s) || k.ID != DeriveID(s) {
			t.Fatalf("ParseKey(%q) = %q", text, k.ID)
		}
	}
	k, err := ParseKey("prod-1:" + hex.EncodeToString(s))
	if err != nil || k.ID != "prod-1" || !bytes.Equal(k.Secret, s) {
		t.Fatalf("with id: %v %v", k.ID, err)
	}
	if DeriveID(s) == DeriveID(randomSecret(t)) {
		t.Fatal("derived ids collide")
	}
}

func TestKeysFromEnv(t *testing.T) {
	s1, s2 := randomSecret(t), randomSecret(t)
	t.Setenv(EnvKey, "")
	t.Setenv(EnvOldKeys, "")
	if k, err := KeysFromEnv(); k != nil || err != nil {
		t.Fatalf("unset: %v %v", k, err)
	}

	t.Setenv(EnvKey, base64.StdEncoding.EncodeToString(s1))
	t.Setenv(EnvOldKeys, "old-a:"+hex.EncodeToString(s2)+", "+base64.StdEncoding.EncodeToString(s2))
	k, err := KeysFromEnv()
	if err != nil {
		t.Fatal(err)
	}
	if k.CurrentID() != DeriveID(s1) {
		t.Fatalf("current id %q", k.CurrentID())
	}
	if got := strings.Join(k.IDs(), ","); !strings.Contains(got, "old-a") || !strings.Contains(got, DeriveID(s2)) {
		t.Fatalf("ids %s", got)
	}

	bad := []struct{ key, old, wantVar string }{
		{"not-a-key", "", EnvKey},
		{base64.StdEncoding.EncodeToString(s1[:16]), "", EnvKey},
		{"bad id!:" + hex.EncodeToString(s1), "", EnvKey},
		{"", "zzz", EnvOldKeys},
		{"", hex.EncodeToString(s1) + ",short", EnvOldKeys},
	}
	secretText := base64.StdEncoding.EncodeToString(s1[:16])
	for _, b := range bad {
		t.Setenv(EnvKey, b.key)
		t.Setenv(EnvOldKeys, b.old)
		_, err := KeysFromEnv()
		if err == nil || !strings.Contains(err.Error(), b.wantVar) {
			t.Errorf("key=%q old=%q: error %v should name %s", b.key, b.old, err, b.wantVar)
			continue
		}
		if strings.Contains(err.Error(), secretText) || strings.Contains(err.Error(), hex.EncodeToString(s1)) {
			t.Errorf("error leaks the key: %v", err)
		}
	}
}

func TestDataConverter(t *testing.T) {
	if DataConverter(nil) != converter.GetDefaultDataConverter() {
		t.Fatal("nil keys should give the default converter")
	}
	dc := DataConverter(mustKeys(t, key(t, "k1")))
	p, err := dc.ToPayload(map[string]string{"brief": plaintext})
	if err != nil {
		t.Fatal(err)
	}
	if string(p.Metadata[converter.MetadataEncoding]) != MetadataEncodingEncrypted || bytes.Contains(p.Data, []byte("do-not-leak")) {
		t.Fatalf("not encrypted: %v", p)
	}
	var back map[string]string
	if err := dc.FromPayload(p, &back); err != nil || back["brief"] != plaintext {
		t.Fatalf("FromPayload: %v %v", back, err)
	}
	// A plain payload from before the codec was on still decodes.
	old, _ := converter.GetDefaultDataConverter().ToPayload("before")
	var s string
	if err := dc.FromPayload(old, &s); err != nil || s != "before" {
		t.Fatalf("old payload: %q %v", s, err)
	}
}
