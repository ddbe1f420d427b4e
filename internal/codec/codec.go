package codec

import (
	"crypto/rand"
	"errors"
	"fmt"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/converter"
	"google.golang.org/protobuf/proto"
)

// Payload metadata written by the codec.
const (
	// MetadataEncodingEncrypted is the "encoding" of an encrypted payload.
	MetadataEncodingEncrypted = "binary/encrypted"
	// MetadataKeyID names the key that encrypted the payload.
	MetadataKeyID = "encryption-key-id"
	// MetadataCipher names the cipher, so a later change of cipher can be
	// told apart from a wrong key.
	MetadataCipher = "encryption-cipher"
	// CipherAES256GCM is the only cipher written and read today.
	CipherAES256GCM = "AES256-GCM"
)

// ErrUnknownKey is returned (wrapped) when a payload names a key ID the ring
// does not have.
var ErrUnknownKey = errors.New("unknown encryption key id")

// ErrDecrypt is returned (wrapped) when a payload fails authentication: the
// key with that ID is not the key that encrypted it, or the bytes changed.
var ErrDecrypt = errors.New("payload decryption failed")

// Codec is the PayloadCodec; its zero value and a codec with nil keys pass
// everything through on Encode.
type Codec struct {
	keys *Keys
}

var _ converter.PayloadCodec = (*Codec)(nil)

// NewCodec returns the encrypting PayloadCodec. With nil keys it encrypts
// nothing and can only pass through payloads that are not encrypted.
func NewCodec(k *Keys) converter.PayloadCodec { return &Codec{keys: k} }

// DataConverter is the SDK's default data converter with the codec applied
// to everything it produces; with nil keys it is the default converter
// itself, so callers can pass KeysFromEnv's result through unconditionally.
func DataConverter(k *Keys) converter.DataConverter {
	if k == nil {
		return converter.GetDefaultDataConverter()
	}
	return converter.NewCodecDataConverter(converter.GetDefaultDataConverter(), NewCodec(k))
}

// aad binds the key ID and the format version into the authentication tag,
// so a payload whose metadata is edited to name another key fails cleanly.
func aad(keyID string) []byte { return []byte("karvi-temporal-codec/v1\x00" + keyID) }

// Encode encrypts each payload with the current key. The whole payload
// (metadata included) is encrypted, so Decode restores its original encoding.
func (c *Codec) Encode(payloads []*commonpb.Payload) ([]*commonpb.Payload, error) {
	if c.keys == nil || c.keys.current == nil {
		return payloads, nil
	}
	key := c.keys.current
	out := make([]*commonpb.Payload, len(payloads))
	for i, p := range payloads {
		plain, err := proto.Marshal(p)
		if err != nil {
			return payloads, fmt.Errorf("encrypt payload %d: marshal: %w", i, err)
		}
		nonce := make([]byte, key.aead.NonceSize(), key.aead.NonceSize()+len(plain)+key.aead.Overhead())
		if _, err := rand.Read(nonce); err != nil {
			return payloads, fmt.Errorf("encrypt payload %d: nonce: %w", i, err)
		}
		out[i] = &commonpb.Payload{
			Metadata: map[string][]byte{
				converter.MetadataEncoding: []byte(MetadataEncodingEncrypted),
				MetadataKeyID:              []byte(key.id),
				MetadataCipher:             []byte(CipherAES256GCM),
			},
			Data: key.aead.Seal(nonce, nonce, plain, aad(key.id)),
		}
	}
	return out, nil
}

// Decode decrypts the payloads that carry the encrypted encoding and passes
// every other payload through untouched (histories written before the codec
// was turned on).
func (c *Codec) Decode(payloads []*commonpb.Payload) ([]*commonpb.Payload, error) {
	out := make([]*commonpb.Payload, len(payloads))
	for i, p := range payloads {
		if string(p.GetMetadata()[converter.MetadataEncoding]) != MetadataEncodingEncrypted {
			out[i] = p
			continue
		}
		d, err := c.decrypt(p)
		if err != nil {
			return payloads, fmt.Errorf("decode payload %d: %w", i, err)
		}
		out[i] = d
	}
	return out, nil
}

func (c *Codec) decrypt(p *commonpb.Payload) (*commonpb.Payload, error) {
	md := p.GetMetadata()
	if ci := string(md[MetadataCipher]); ci != "" && ci != CipherAES256GCM {
		return nil, fmt.Errorf("payload uses cipher %q, this codec knows only %s", ci, CipherAES256GCM)
	}
	id := string(md[MetadataKeyID])
	if id == "" {
		return nil, fmt.Errorf("encrypted payload has no %s metadata", MetadataKeyID)
	}
	if c.keys == nil {
		return nil, fmt.Errorf("%w %q: payload is encrypted but no codec key is configured (set %s, or %s for retired keys)",
			ErrUnknownKey, id, EnvKey, EnvOldKeys)
	}
	key, ok := c.keys.byID[id]
	if !ok {
		return nil, fmt.Errorf("%w %q: this process knows %v (add the key to %s or %s)",
			ErrUnknownKey, id, c.keys.IDs(), EnvKey, EnvOldKeys)
	}
	ns := key.aead.NonceSize()
	if len(p.GetData()) < ns+key.aead.Overhead() {
		return nil, fmt.Errorf("%w: key %q: payload is %d bytes, too short to be encrypted", ErrDecrypt, id, len(p.GetData()))
	}
	plain, err := key.aead.Open(nil, p.Data[:ns], p.Data[ns:], aad(id))
	if err != nil {
		return nil, fmt.Errorf("%w: key %q: authentication failed (a different key under this id, or a corrupted payload)", ErrDecrypt, id)
	}
	var d commonpb.Payload
	if err := proto.Unmarshal(plain, &d); err != nil {
		return nil, fmt.Errorf("%w: key %q: decrypted bytes are not a payload: %v", ErrDecrypt, id, err)
	}
	return &d, nil
}
