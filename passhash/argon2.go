package passhash

import (
	"crypto/subtle"
	"fmt"
	"strings"

	"golang.org/x/crypto/argon2"
)

// argon2Hash is "$argon2id$v=19$m=<KiB>,t=<passes>,p=<lanes>$salt$hash"
// (or $argon2i$), salt and hash in unpadded base64: what PHP's
// password_hash, argon2-cffi, passlib and node-argon2 write. Only version
// 19 (1.3, the only one x/crypto computes) is read; the optional
// keyid= and data= parameters are not.
type argon2Hash struct {
	format        Format
	memory, time  uint32 // KiB, passes
	threads       uint8
	salt, derived []byte
}

func parseArgon2(s string, f Format) (Hash, error) {
	// "", "argon2id", "v=19", "m=…,t=…,p=…", salt, hash
	parts := strings.Split(s, "$")
	if len(parts) != 6 {
		return nil, fmt.Errorf("%w: %s is $%s$v=19$m=…,t=…,p=…$salt$hash", ErrMalformed, f, f)
	}
	if parts[2] != "v=19" {
		return nil, fmt.Errorf("%w: %s version other than v=19", ErrMalformed, f)
	}
	p, err := phcParams(parts[3], []string{"m", "t", "p"}, []int{MaxArgon2Memory >> 10, MaxArgon2Time, MaxArgon2Threads}, f)
	if err != nil {
		return nil, err
	}
	m, t, lanes := p[0], p[1], p[2]
	if t < 1 || lanes < 1 || m < 8*lanes {
		return nil, fmt.Errorf("%w: %s needs t >= 1, p >= 1 and m >= 8p", ErrMalformed, f)
	}
	salt, err := decodeParam(b64, parts[4], "salt", 8)
	if err != nil {
		return nil, err
	}
	derived, err := decodeParam(b64, parts[5], "hash", 4)
	if err != nil {
		return nil, err
	}
	return argon2Hash{format: f, memory: uint32(m), time: uint32(t), threads: uint8(lanes), salt: salt, derived: derived}, nil
}

func (h argon2Hash) Format() Format { return h.format }

func (h argon2Hash) Cost() Cost {
	return Cost{Memory: int64(h.memory) << 10, Threads: int(h.threads)}
}

func (h argon2Hash) Verify(password string) bool {
	n := uint32(len(h.derived))
	var got []byte
	if h.format == Argon2id {
		got = argon2.IDKey([]byte(password), h.salt, h.time, h.memory, h.threads, n)
	} else {
		got = argon2.Key([]byte(password), h.salt, h.time, h.memory, h.threads, n)
	}
	return subtle.ConstantTimeCompare(got, h.derived) == 1
}
