package keywarden

// X25519 (RFC 7748) for the realtime channel's handshake. Go 1.19's standard library has no X25519
// (crypto/ecdh arrived in 1.20), so this is the TweetNaCl formulation: 16 limbs of 16 bits, a
// constant-time Montgomery ladder with conditional swaps, no secret-dependent branches or indices.

type gf [16]int64

var gf121665 = gf{0xDB41, 1}

func car25519(o *gf) {
	for i := 0; i < 16; i++ {
		o[i] += 1 << 16
		c := o[i] >> 16
		if i < 15 {
			o[i+1] += c - 1
		} else {
			o[0] += 38 * (c - 1)
		}
		o[i] -= c << 16
	}
}

func sel25519(p, q *gf, b int64) {
	c := ^(b - 1)
	for i := 0; i < 16; i++ {
		t := c & (p[i] ^ q[i])
		p[i] ^= t
		q[i] ^= t
	}
}

func pack25519(n *gf) [32]byte {
	var m gf
	t := *n
	car25519(&t)
	car25519(&t)
	car25519(&t)
	for j := 0; j < 2; j++ {
		m[0] = t[0] - 0xffed
		for i := 1; i < 15; i++ {
			m[i] = t[i] - 0xffff - ((m[i-1] >> 16) & 1)
			m[i-1] &= 0xffff
		}
		m[15] = t[15] - 0x7fff - ((m[14] >> 16) & 1)
		b := (m[15] >> 16) & 1
		m[14] &= 0xffff
		sel25519(&t, &m, 1-b)
	}
	var o [32]byte
	for i := 0; i < 16; i++ {
		o[2*i] = byte(t[i] & 0xff)
		o[2*i+1] = byte(t[i] >> 8)
	}
	return o
}

func unpack25519(n []byte) gf {
	var o gf
	for i := 0; i < 16; i++ {
		o[i] = int64(n[2*i]) + int64(n[2*i+1])<<8
	}
	o[15] &= 0x7fff
	return o
}

func feAdd(o, a, b *gf) {
	for i := 0; i < 16; i++ {
		o[i] = a[i] + b[i]
	}
}

func feSub(o, a, b *gf) {
	for i := 0; i < 16; i++ {
		o[i] = a[i] - b[i]
	}
}

func feMul(o, a, b *gf) {
	var t [31]int64
	for i := 0; i < 16; i++ {
		for j := 0; j < 16; j++ {
			t[i+j] += a[i] * b[j]
		}
	}
	for i := 0; i < 15; i++ {
		t[i] += 38 * t[i+16]
	}
	for i := 0; i < 16; i++ {
		o[i] = t[i]
	}
	car25519(o)
	car25519(o)
}

func feInv(o, i *gf) {
	c := *i
	for a := 253; a >= 0; a-- {
		feMul(&c, &c, &c)
		if a != 2 && a != 4 {
			feMul(&c, &c, i)
		}
	}
	*o = c
}

// x25519 returns scalar * point (both 32 bytes, little-endian u-coordinate).
func x25519(scalar, point []byte) [32]byte {
	var z [32]byte
	copy(z[:], scalar)
	z[31] = (z[31] & 127) | 64
	z[0] &= 248
	x := unpack25519(point)
	var a, b, c, d, e, f gf
	b = x
	a[0], d[0] = 1, 1
	for i := 254; i >= 0; i-- {
		r := int64((z[i>>3] >> (uint(i) & 7)) & 1)
		sel25519(&a, &b, r)
		sel25519(&c, &d, r)
		feAdd(&e, &a, &c)
		feSub(&a, &a, &c)
		feAdd(&c, &b, &d)
		feSub(&b, &b, &d)
		feMul(&d, &e, &e)
		feMul(&f, &a, &a)
		feMul(&a, &c, &a)
		feMul(&c, &b, &e)
		feAdd(&e, &a, &c)
		feSub(&a, &a, &c)
		feMul(&b, &a, &a)
		feSub(&c, &d, &f)
		feMul(&a, &c, &gf121665)
		feAdd(&a, &a, &d)
		feMul(&c, &c, &a)
		feMul(&a, &d, &f)
		feMul(&d, &b, &x)
		feMul(&b, &e, &e)
		sel25519(&a, &b, r)
		sel25519(&c, &d, r)
	}
	feInv(&c, &c)
	feMul(&a, &a, &c)
	return pack25519(&a)
}

var x25519Base = []byte{9, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}
