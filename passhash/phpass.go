package passhash

import (
	"crypto/md5"
	"crypto/subtle"
	"fmt"
	"strings"
)

// phpassHash is the portable phpass hash: "$P$" (WordPress before 6.8)
// or "$H$" (phpBB 3), one character of log2 rounds, 8 of salt and 22 of
// MD5 in phpass' own base64; the salt's characters are used as they
// are. hash = md5(salt ‖ password), then 2^rounds times md5(hash ‖ password).
type phpassHash struct {
	rounds int
	salt   string
	sum    string
}

// itoa64 is phpass' base64 alphabet.
const itoa64 = "./0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"

var itoa64Chars = charset(itoa64)

func parsePHPass(s string) (Hash, error) {
	if len(s) != 34 {
		return nil, fmt.Errorf("%w: phpass is 34 characters", ErrMalformed)
	}
	for i := 3; i < len(s); i++ {
		if !itoa64Chars[s[i]] {
			return nil, fmt.Errorf("%w: phpass characters outside its alphabet", ErrMalformed)
		}
	}
	rounds := strings.IndexByte(itoa64, s[3])
	// phpass' own range is 7 to 30.
	if rounds < 7 || rounds > 30 {
		return nil, fmt.Errorf("%w: phpass rounds 2^%d", ErrMalformed, rounds)
	}
	if rounds > MaxPHPassRounds {
		return nil, fmt.Errorf("%w: phpass rounds 2^%d, at most 2^%d", ErrTooCostly, rounds, MaxPHPassRounds)
	}
	return phpassHash{rounds: rounds, salt: s[4:12], sum: s[12:]}, nil
}

func (phpassHash) Format() Format { return PHPass }
func (phpassHash) Cost() Cost     { return Cost{Threads: 1} }

func (h phpassHash) Verify(password string) bool {
	buf := make([]byte, 0, md5.Size+len(password))
	sum := md5.Sum(append(append(buf, h.salt...), password...))
	for range 1 << h.rounds {
		sum = md5.Sum(append(append(buf[:0], sum[:]...), password...))
	}
	return subtle.ConstantTimeCompare([]byte(phpassEncode(sum[:])), []byte(h.sum)) == 1
}

// phpassEncode is phpass' encode64: little-endian groups of three bytes,
// six bits a character, least significant first.
func phpassEncode(in []byte) string {
	var out strings.Builder
	for i := 0; i < len(in); i += 3 {
		v := uint(in[i])
		n := 2
		if i+1 < len(in) {
			v |= uint(in[i+1]) << 8
			n = 3
		}
		if i+2 < len(in) {
			v |= uint(in[i+2]) << 16
			n = 4
		}
		for j := range n {
			out.WriteByte(itoa64[v>>(6*j)&0x3f])
		}
	}
	return out.String()
}
