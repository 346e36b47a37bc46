package main

import (
	"os"
	"testing"

	"github.com/toolgate/toolgate/tools/code"
)

func TestMain(m *testing.M) {
	// serve starts run_code's children ahead: in tests, this test binary,
	// re-executed as a child.
	code.ServeChildIfAsked()
	os.Exit(m.Run())
}
