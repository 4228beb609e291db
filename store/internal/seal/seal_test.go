package seal

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/sandlot/sandlot/errdefs"
)

func TestSeal(t *testing.T) {
	key := bytes.Repeat([]byte{7}, KeySize)
	b, err := New(key)
	if err != nil {
		t.Fatal(err)
	}
	const v = "sk-live-0123456789"
	s, err := b.Seal("t1", "api", v)
	if err != nil {
		t.Fatal(err)
	}
	if !Sealed(s) || strings.Contains(s, v) {
		t.Fatalf("sealed value %q", s)
	}
	if s2, _ := b.Seal("t1", "api", v); s2 == s {
		t.Error("two seals of one value are equal: the nonce is not fresh")
	}
	if got, err := b.Open("t1", "api", s); err != nil || got != v {
		t.Fatalf("open: %q %v", got, err)
	}
	other, _ := New(bytes.Repeat([]byte{8}, KeySize))
	tampered := s[:len(s)-2] + "AA"
	for _, c := range []struct {
		name               string
		box                *Box
		tenant, sec, value string
	}{
		{"wrong key", other, "t1", "api", s},
		{"no key", nil, "t1", "api", s},
		{"another tenant's row", b, "t2", "api", s},
		{"another name", b, "t1", "api2", s},
		{"tampered", b, "t1", "api", tampered},
		{"not base64", b, "t1", "api", Prefix + "!!"},
		{"too short", b, "t1", "api", Prefix + "AAAA"},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := c.box.Open(c.tenant, c.sec, c.value)
			if !errors.Is(err, ErrWrongKey) || got != "" {
				t.Errorf("open: %q %v, want ErrWrongKey and nothing", got, err)
			}
			if errdefs.IsClientFault(err) {
				t.Errorf("a key that does not open is the daemon's fault, not the caller's: %v", err)
			}
		})
	}
	if got, err := b.Open("t1", "api", "plain-legacy"); err != nil || got != "plain-legacy" {
		t.Errorf("a value written before encryption: %q %v", got, err)
	}
	if _, err := (*Box)(nil).Seal("t1", "api", v); !errors.Is(err, errdefs.ErrFailedPrecondition) {
		t.Errorf("seal without a key: %v", err)
	}
	if _, err := New(key[:16]); !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Errorf("a 16-byte key: %v", err)
	}
}

// TestUnsealed: plaintext rows come back sealed (and open to their value);
// sealed rows are left alone; a sealed row another key made is an error.
func TestUnsealed(t *testing.T) {
	b, _ := New(bytes.Repeat([]byte{7}, KeySize))
	other, _ := New(bytes.Repeat([]byte{8}, KeySize))
	mine, _ := b.Seal("t1", "A", "a")
	theirs, _ := other.Seal("t1", "A", "a")
	plain, sealed, err := b.Unsealed([]Row{{"t1", "A", mine}, {"t1", "B", "b"}, {"t2", "C", "c"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(plain) != 2 || plain[0].Name != "B" || plain[1].Name != "C" || len(sealed) != 2 {
		t.Fatalf("plain %v, sealed %v: want B and C", plain, sealed)
	}
	for i, r := range plain {
		if v, err := b.Open(r.Tenant, r.Name, sealed[i]); err != nil || v != r.Value {
			t.Errorf("%s sealed to %q: opens to %q, %v", r.Name, sealed[i], v, err)
		}
	}
	if _, _, err := b.Unsealed([]Row{{"t1", "A", theirs}, {"t1", "B", "b"}}); err == nil {
		t.Fatal("a row sealed under another key: no error")
	}
}

// TestSealEnv: a context's environment is sealed (no value in the clear),
// opens for its own tenant and context only, never as a secret, and not
// under another key or without one.
func TestSealEnv(t *testing.T) {
	b, err := New(bytes.Repeat([]byte{7}, KeySize))
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"API_TOKEN": "tok-0123456789", "MODE": "blue"}
	s, err := b.SealEnv("t1", "c1", env)
	if err != nil {
		t.Fatal(err)
	}
	if !Sealed(s) || strings.Contains(s, "tok-0123456789") || strings.Contains(s, "API_TOKEN") {
		t.Fatalf("sealed env %q", s)
	}
	got, err := b.OpenEnv("t1", "c1", s)
	if err != nil || len(got) != 2 || got["API_TOKEN"] != env["API_TOKEN"] || got["MODE"] != "blue" {
		t.Fatalf("open: %v %v", got, err)
	}
	if s, err := b.SealEnv("t1", "c1", nil); err != nil || s != "" {
		t.Fatalf("empty env sealed as %q, %v; want \"\"", s, err)
	}
	if got, err := b.OpenEnv("t1", "c1", ""); err != nil || got != nil {
		t.Fatalf(`OpenEnv(""): %v %v`, got, err)
	}
	if _, err := (*Box)(nil).SealEnv("t1", "c1", env); err == nil {
		t.Fatal("SealEnv without a key succeeded")
	}
	other, _ := New(bytes.Repeat([]byte{8}, KeySize))
	for _, c := range []struct {
		name string
		open func() error
	}{
		{"another context", func() error { _, err := b.OpenEnv("t1", "c2", s); return err }},
		{"another tenant", func() error { _, err := b.OpenEnv("t2", "c1", s); return err }},
		{"as a secret", func() error { _, err := b.Open("t1", "c1", s); return err }},
		{"wrong key", func() error { _, err := other.OpenEnv("t1", "c1", s); return err }},
		{"no key", func() error { _, err := (*Box)(nil).OpenEnv("t1", "c1", s); return err }},
		{"in the clear", func() error { _, err := b.OpenEnv("t1", "c1", `{"A":"b"}`); return err }},
	} {
		t.Run(c.name, func(t *testing.T) {
			if err := c.open(); !errors.Is(err, ErrWrongKey) {
				t.Fatalf("%v, want ErrWrongKey", err)
			}
		})
	}
}
