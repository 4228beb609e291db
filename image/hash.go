package image

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"hash"
	"io"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

type hasher struct{ hash.Hash }

func v1Hasher() hasher { return hasher{sha256.New()} }

func (h hasher) sum() v1.Hash {
	return v1.Hash{Algorithm: "sha256", Hex: hex.EncodeToString(h.Sum(nil))}
}

func bytesReader(b []byte) io.Reader { return bytes.NewReader(b) }
