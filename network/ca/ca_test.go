package ca

import (
	"crypto/x509"
	"testing"
	"time"
)

func TestLeafVerifiesOnlyAgainstItsCA(t *testing.T) {
	a, err := New("sb-a", 0)
	if err != nil {
		t.Fatal(err)
	}
	b, err := New("sb-b", 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"api.example.test", "203.0.113.11"} {
		leaf, err := a.Leaf(name)
		if err != nil {
			t.Fatal(err)
		}
		poolA, poolB := x509.NewCertPool(), x509.NewCertPool()
		poolA.AppendCertsFromPEM(a.CertPEM())
		poolB.AppendCertsFromPEM(b.CertPEM())
		if _, err := leaf.Leaf.Verify(x509.VerifyOptions{DNSName: name, Roots: poolA}); err != nil {
			t.Errorf("%s: leaf does not verify against its CA: %v", name, err)
		}
		if _, err := leaf.Leaf.Verify(x509.VerifyOptions{DNSName: name, Roots: poolB}); err == nil {
			t.Errorf("%s: leaf verifies against another sandbox's CA", name)
		}
		if _, err := leaf.Leaf.Verify(x509.VerifyOptions{DNSName: "other.test", Roots: poolA}); err == nil {
			t.Errorf("%s: leaf verifies for another name", name)
		}
		again, _ := a.Leaf(name)
		if again != leaf {
			t.Errorf("%s: leaf not cached", name)
		}
		if leaf.Leaf.NotAfter.Sub(time.Now()) > 8*24*time.Hour {
			t.Errorf("%s: leaf lives until %v", name, leaf.Leaf.NotAfter)
		}
	}
	if _, err := a.Leaf(""); err == nil {
		t.Error("leaf for an empty name")
	}
}

func TestParseRoundTrip(t *testing.T) {
	a, _ := New("sb-a", time.Hour)
	key, err := a.KeyPEM()
	if err != nil {
		t.Fatal(err)
	}
	back, err := Parse(a.CertPEM(), key)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := back.Leaf("x.test")
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(a.CertPEM())
	if _, err := leaf.Leaf.Verify(x509.VerifyOptions{DNSName: "x.test", Roots: pool}); err != nil {
		t.Errorf("leaf of the parsed CA: %v", err)
	}
	if leaf.Leaf.NotAfter.After(a.Certificate().NotAfter) {
		t.Error("leaf outlives its CA")
	}
	other, _ := New("sb-b", 0)
	otherKey, _ := other.KeyPEM()
	if _, err := Parse(a.CertPEM(), otherKey); err == nil {
		t.Error("Parse accepted a foreign key")
	}
	if _, err := Parse([]byte("junk"), key); err == nil {
		t.Error("Parse accepted junk")
	}
}
