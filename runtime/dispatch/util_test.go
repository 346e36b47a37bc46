package dispatch_test

import (
	"bytes"
	"io"
)

func contains(b []byte, s string) bool { return bytes.Contains(b, []byte(s)) }

func bytesReader(b []byte) io.Reader { return bytes.NewReader(b) }
