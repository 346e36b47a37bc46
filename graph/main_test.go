package graph_test

import (
	"os"
	"testing"

	"github.com/toolgate/toolgate/tools/code"
	"github.com/toolgate/toolgate/tools/document"
)

func TestMain(m *testing.M) {
	// run_code's sandbox children and the documents' extraction children
	// are this test binary, re-executed.
	code.ServeChildIfAsked()
	document.ServeChildIfAsked()
	os.Exit(m.Run())
}
