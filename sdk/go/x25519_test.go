package keywarden

import (
	"encoding/hex"
	"testing"
)

// RFC 7748 section 5.2 and 6.1.
func TestX25519RFC7748(t *testing.T) {
	h := func(s string) []byte { b, _ := hex.DecodeString(s); return b }
	got := x25519(h("a546e36bf0527c9d3b16154b82465edd62144c0ac1fc5a18506a2244ba449ac4"), h("e6db6867583030db3594c1a424b15f7c726624ec26b3353b10a903a6d0ab1c4c"))
	if hex.EncodeToString(got[:]) != "c3da55379de9c6908e94ea4df28d084f32eccf03491c71f754b4075577a28552" {
		t.Fatalf("5.2: %x", got)
	}
	alicePub := x25519(h("77076d0a7318a57d3c16c17251b26645df4c2f87ebc0992ab177fba51db92c2a"), x25519Base)
	if hex.EncodeToString(alicePub[:]) != "8520f0098930a754748b7ddcb43ef75a0dbf3a0d26381af4eba4a98eaa9b4e6a" {
		t.Fatalf("alice public: %x", alicePub)
	}
	shared := x25519(h("5dab087e624a8a4b79e17f8b83800ee66f3bb1292618b6fd1c2f8b27ff88e0eb"), alicePub[:])
	if hex.EncodeToString(shared[:]) != "4a5d9d5ba4ce2de1728e3bf480350f25e07e21c947d19e3376f09b3c1e161742" {
		t.Fatalf("shared: %x", shared)
	}
}
