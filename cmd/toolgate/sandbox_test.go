package main

import (
	"os"
	"testing"

	"github.com/toolgate/toolgate/tools/code"
	"github.com/toolgate/toolgate/tools/document"
)

func TestMain(m *testing.M) {
	// serve starts run_code's children ahead: in tests, this test binary,
	// re-executed as a child.
	code.ServeChildIfAsked()
	// and the documents' extraction children.
	document.ServeChildIfAsked()
	status := m.Run()
	if built.dir != "" {
		_ = os.RemoveAll(built.dir)
	}
	os.Exit(status)
}
