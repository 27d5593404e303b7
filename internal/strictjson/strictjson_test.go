package strictjson

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
)

func TestCheckDuplicates(t *testing.T) {
	tests := []struct {
		in string
		ok bool
	}{
		{`{"a":1,"b":2}`, true},
		{`{"a":{"b":1},"c":[{"b":2},{"b":3}]}`, true},
		{`[1,2]`, true},
		{`"x"`, true},
		{`{"a":1,"a":2}`, false},
		{`{"x":{"a":1,"a":2}}`, false},
		{`{"x":[{"a":1,"a":2}]}`, false},
		{`{"a":1} {}`, false},
		{`{"a":`, false},
		{``, false},
		{`{"\u0061":1,"a":2}`, false},
	}
	for _, tt := range tests {
		if err := CheckDuplicates([]byte(tt.in)); (err == nil) != tt.ok {
			t.Errorf("CheckDuplicates(%s): got %v, want ok=%v", tt.in, err, tt.ok)
		}
	}
}

// referenceCheck is the json.Decoder.Token walk CheckDuplicates used to
// be: slow, but built only on encoding/json. The fast walk must agree
// with it on every input. UseNumber: the old walk also refused numbers
// beyond float64 (1e400) by accident; whether such a number is acceptable
// is for the parser that reads the value to say, not the duplicate check.
func referenceCheck(data []byte) error {
	if !json.Valid(data) {
		return ErrInvalid
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var walk func() error
	walk = func() error {
		tok, err := dec.Token()
		if err != nil {
			return err
		}
		switch tok {
		case json.Delim('{'):
			seen := map[string]bool{}
			for dec.More() {
				k, err := dec.Token()
				if err != nil {
					return err
				}
				if seen[k.(string)] {
					return errors.New("duplicate")
				}
				seen[k.(string)] = true
				if err := walk(); err != nil {
					return err
				}
			}
			_, err = dec.Token()
			return err
		case json.Delim('['):
			for dec.More() {
				if err := walk(); err != nil {
					return err
				}
			}
			_, err = dec.Token()
			return err
		}
		return nil
	}
	if err := walk(); err != nil {
		return err
	}
	if _, err := dec.Token(); err != io.EOF {
		return ErrInvalid
	}
	return nil
}

var agreeSeeds = []string{
	`{"a":1,"b":2}`, `{"a":1,"a":2}`, `{"\u0061":1,"a":2}`, `{"a\"b":1,"a\u0022b":2}`,
	"{\"\xff\":1,\"\xfe\":2}", "{\"\xff\":1,\"\ufffd\":2}", `{"x":[{"a":1},{"a":2}],"y":{"a":{"a":3}}}`,
	` { "a" : [ 1 , 2.5e3 , -0 , true , false , null , "s" ] , "b" : { } , "c" : [ ] } `,
	`[{"a":1,"a":1}]`, `"plain"`, `12`, `null`, `{"a":1}x`, `{"a":`, ``, `{"\\":1,"\\\\":2,"\\":3}`,
	`{"k1":1,"k2":2,"k3":3,"k4":4,"k5":5,"k6":6,"k7":7,"k8":8,"k9":9,"k10":10,"k11":11,"k12":12,"k13":13,"k14":14,"k15":15,"k16":16,"k17":17,"k18":18,"k1":19}`,
	`{"k1":1,"k2":2,"k3":3,"k4":4,"k5":5,"k6":6,"k7":7,"k8":8,"k9":9,"k10":10,"k11":11,"k12":12,"k13":13,"k14":14,"k15":15,"k16":16,"k17":17,"k18":18,"k19":19}`,
	// The walk validates: numbers, literals, escapes, control bytes,
	// separators, and the nesting limit json.Valid has.
	`01`, `-`, `-0.`, `1.e5`, `1e`, `1e+`, `.5`, `+1`, `1.5E-07`, `-0`, `tru`, `nul`, `truex`, `[1 2]`, `[1,]`, `{"a" 1}`,
	`{"a":1,}`, `{,}`, `{"a":1 "b":2}`, `{1:2}`, "\"a\tb\"", "\"\x7f\"", `"\x"`, `"\u12"`, `"\u12G4"`, `"\uD800\uDC00"`,
	`"\/\b\f\n\r\t\\\""`, "\xef\xbb\xbf{}", ` `, `[[[]]]`, `{"a":{"a":1,"b":{"a":[{"a":1,"a":2}]}}}`, `{"a":1,"a":2`, `{"a":1,"a":2}}`,
}

// TestNestingLimit: json.Valid refuses nesting deeper than 10,000, and so
// does the walk (which is recursive: the limit bounds its stack).
func TestNestingLimit(t *testing.T) {
	for _, s := range []string{
		strings.Repeat("[", 10000) + strings.Repeat("]", 10000), strings.Repeat("[", 10001) + strings.Repeat("]", 10001),
		strings.Repeat(`{"a":`, 10000) + "1" + strings.Repeat("}", 10000), strings.Repeat(`{"a":`, 10001) + "1" + strings.Repeat("}", 10001),
		strings.Repeat("[", 1<<20),
	} {
		got := CheckDuplicates([]byte(s))
		if errors.Is(got, ErrInvalid) != !json.Valid([]byte(s)) {
			t.Errorf("%d bytes: walk says %v, json.Valid says %v", len(s), got, json.Valid([]byte(s)))
		}
	}
}

func TestAgreesWithDecoder(t *testing.T) {
	for _, s := range agreeSeeds {
		got, want := CheckDuplicates([]byte(s)), referenceCheck([]byte(s))
		if (got == nil) != (want == nil) {
			t.Errorf("%q: fast walk says %v, decoder walk says %v", s, got, want)
		}
		if errors.Is(got, ErrInvalid) != !json.Valid([]byte(s)) {
			t.Errorf("%q: walk says %v, json.Valid says %v", s, got, json.Valid([]byte(s)))
		}
	}
}

func FuzzCheckDuplicates(f *testing.F) {
	for _, s := range agreeSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		got, want := CheckDuplicates(data), referenceCheck(data)
		if (got == nil) != (want == nil) {
			t.Fatalf("%q: fast walk says %v, decoder walk says %v", data, got, want)
		}
		// The walk validates on its own: exactly json.Valid's language.
		if errors.Is(got, ErrInvalid) != !json.Valid(data) {
			t.Fatalf("%q: walk says %v, json.Valid says %v", data, got, json.Valid(data))
		}
	})
}

// A JWT payload as the issuer writes it.
var benchPayload = []byte(`{"sub":"akmP7XXOjOYFZoWiiVeu21wGxffpg2mz","iat":1795000000,"exp":1797592000,"iss":"https://app.example.com","aud":"https://app.example.com","jti":"0123456789abcdef0123456789abcdef","id":"akmP7XXOjOYFZoWiiVeu21wGxffpg2mz","email":"user@example.com","name":"Bench User","emailVerified":false,"image":null}`)

func BenchmarkCheckDuplicates(b *testing.B) {
	for _, impl := range []struct {
		name string
		f    func([]byte) error
	}{{"walk", CheckDuplicates}, {"decoder", referenceCheck}} {
		b.Run(impl.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if err := impl.f(benchPayload); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func TestMembers(t *testing.T) {
	tests := []struct {
		in   string
		want string // name=value pairs, or the error
	}{
		{`{"a":1,"b":"x","c":{"d":[1,2]},"e":null}`, `a=1 b="x" c={"d":[1,2]} e=null`},
		{` { "a" : 1 , "b":true } `, `a=1 b=true`},
		{`{"\u0061b":1,"SUB":2}`, `ab=1 SUB=2`},
		{`{}`, ``},
		{`{"a":1,"a":2}`, `duplicate member "a"`},
		{`{"x":{"a":1,"a":2}}`, `duplicate member "a"`},
		{`[1]`, ErrNotObject.Error()},
		{`"x"`, ErrNotObject.Error()},
		{`{"a":1`, ErrInvalid.Error()},
		{`{"a":1} 2`, ErrInvalid.Error()},
	}
	for _, tt := range tests {
		var got []string
		err := Members([]byte(tt.in), func(name, value []byte) error {
			got = append(got, string(name)+"="+string(value))
			return nil
		})
		s := fmt.Sprint(strings.Join(got, " "))
		if err != nil {
			s = err.Error()
		}
		if s != tt.want {
			t.Errorf("Members(%s) = %q, want %q", tt.in, s, tt.want)
		}
	}
	stop := errors.New("stop")
	n := 0
	if err := Members([]byte(`{"a":1,"b":2}`), func(_, _ []byte) error { n++; return stop }); err != stop || n != 1 {
		t.Errorf("an error from fn: got %v after %d calls, want stop after 1", err, n)
	}
}

func TestStringAndElements(t *testing.T) {
	for in, want := range map[string]string{`"a"`: "a", `"\u00e9\n"`: "é\n", `""`: "", `"\ud800"`: "\uFFFD", "\"\xff\"": "\uFFFD"} {
		if s, ok := String([]byte(in)); !ok || string(s) != want {
			t.Errorf("String(%s) = %q, %v; want %q", in, s, ok, want)
		}
	}
	for _, in := range []string{`5`, `null`, `["a"]`, ``} {
		if _, ok := String([]byte(in)); ok {
			t.Errorf("String(%s) ok, want not a string", in)
		}
	}
	for in, want := range map[string]string{`[]`: "", `[1, "a" ,{"b":[2]}]`: `1|"a"|{"b":[2]}`, ` [null] `: "null"} {
		var got []string
		ok, err := Elements([]byte(in), func(e []byte) error { got = append(got, string(e)); return nil })
		if !ok || err != nil || strings.Join(got, "|") != want {
			t.Errorf("Elements(%s) = %q, %v, %v; want %q", in, got, ok, err, want)
		}
	}
	for _, in := range []string{`{}`, `"a"`, `[1,]`, `[{"a":1,"a":1}]`} {
		if ok, err := Elements([]byte(in), func([]byte) error { return nil }); ok && err == nil {
			t.Errorf("Elements(%s) accepted", in)
		}
	}
}
