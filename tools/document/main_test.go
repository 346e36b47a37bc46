package document_test

import (
	"os"
	"testing"

	"github.com/toolgate/toolgate/tools/document"
)

func TestMain(m *testing.M) {
	// The extraction box's children are this test binary, re-executed.
	document.ServeChildIfAsked()
	os.Exit(m.Run())
}
